package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/sampler"
)

// DebateConfig describes a whole-debate measurement on synthetic problems.
type DebateConfig struct {
	// Agents are the GGUF models of the agents; a path given twice is two agents on one
	// model (one engine, where debate prompts are shared).
	Agents      []string
	Labels      []string // per agent, how the tables name its model (default: the file name)
	Problems    int
	K, Turns    int
	MaxTokens   int
	PromptLimit int
	Slots       int
	Threads     int // per engine; 0 = the physical cores shared among the engines
	GPULayers   int
	Params      sampler.Params
	Repeats     int // the debate runs this many times; the bare rates are the best of as many
}

// DebateFigures are the results of one debate measurement, summed over the engines.
type DebateFigures struct {
	Engines, Generations int
	Walls                []time.Duration // each run's wall time
	PromptTokens         int64           // prompt tokens sent to llama.cpp
	NaivePromptTokens    int64           // what decoding every sample's prompt would send
	GeneratedTokens      int64
	Steps                int64         // llama.cpp decode calls
	DecodeTime           time.Duration // inside llama_decode, summed over the engines
	SampleTime           time.Duration // inside the sampler, summed over the engines
	// Bare is the time llama.cpp's bare loop needs for the prompt tokens decoded and the
	// tokens generated, at its prefill and decode rates on the same model and threads
	// (engines run concurrently: the slowest engine's time); BareNaive the same for every
	// sample's whole prompt.
	Bare, BareNaive time.Duration
	// Efficiency is Bare over the best wall time; Speedup is BareNaive over it.
	Efficiency, Speedup float64
	Rates               []BareRates // per engine
}

// BareRates are a bare loop's throughput on one model.
type BareRates struct {
	Model           string
	Threads         int
	PromptLen       int     // prompt length timed: the engine's mean prompt in the debate
	PrefillTokS     float64 // prompt tokens per second, Slots prompts in batches of 2048 tokens
	DecodeTokS      float64 // tokens per second, Slots sequences one token a step
	StreamCopy      time.Duration
	CopyPromptTkEqv float64 // StreamCopy in prompt tokens at PrefillTokS
}

// debateEngine is one distinct model of a debate with its engine.
type debateEngine struct {
	label   string
	model   *llama.Model
	engine  *engine.Engine
	threads int
	before  engine.Stats
	// prompts and promptTokens count the samples generated and their prompt tokens.
	prompts, promptTokens int
}

// Debate runs a debate among cfg.Agents on cfg.Problems synthetic problems (repeatedly),
// then times a bare llama.cpp loop on each model at the debate's mean prompt length, and
// compares.
func Debate(cfg DebateConfig) (DebateFigures, error) {
	var f DebateFigures
	if len(cfg.Agents) == 0 {
		return f, fmt.Errorf("bench debate: no agents")
	}
	if cfg.Repeats < 1 {
		cfg.Repeats = 1
	}
	byPath := map[string]*debateEngine{}
	var engines []*debateEngine
	defer func() {
		for _, de := range engines {
			de.engine.Close()
			de.model.Close()
		}
	}()
	distinct := map[string]bool{}
	for _, p := range cfg.Agents {
		distinct[p] = true
	}
	seqCtx := cfg.PromptLimit + cfg.MaxTokens
	var agents []engine.DebateAgent
	var of []*debateEngine // each agent's
	for i, p := range cfg.Agents {
		de := byPath[p]
		if de == nil {
			m, err := engine.LoadModel(p, llama.ModelParams{GPULayers: cfg.GPULayers})
			if err != nil {
				return f, err
			}
			threads := cfg.Threads
			if threads == 0 {
				threads = engine.SharedThreads(len(distinct)) // the engines decode concurrently
			}
			e, err := engine.New(m, engine.Options{Slots: cfg.Slots, SeqContext: seqCtx, Threads: threads, KVType: llama.KVF16})
			if err != nil {
				m.Close()
				return f, err
			}
			label := filepath.Base(p)
			if i < len(cfg.Labels) {
				label = cfg.Labels[i]
			}
			de = &debateEngine{label: label, model: m, engine: e, threads: threads}
			byPath[p] = de
			engines = append(engines, de)
		}
		format, err := chat.Resolve(de.model.ChatTemplate(), "")
		if err != nil {
			return f, fmt.Errorf("%s: %w", p, err)
		}
		of = append(of, de)
		agents = append(agents, engine.DebateAgent{Name: fmt.Sprintf("agent%d", i), Generator: de.engine, Format: format,
			Params: cfg.Params, MaxTokens: cfg.MaxTokens, Seed: 1})
	}
	f.Engines = len(engines)
	problems := data.Synthetic(cfg.Problems, 1)
	dcfg := engine.DebateConfig{Agents: agents, Turns: cfg.Turns, K: cfg.K, PromptLimit: cfg.PromptLimit}
	var best time.Duration
	var prompt, naive, gen []int64 // per engine, of the best run
	var work engine.Stats          // summed over the engines, of the best run
	for r := 0; r < cfg.Repeats; r++ {
		for _, de := range engines {
			de.before = de.engine.Stats()
		}
		t0 := time.Now()
		st, err := engine.Debate(context.Background(), dcfg, problems, nil, func(rec engine.DebateRecord) error {
			for _, turn := range rec.Turns {
				for a, byTraj := range turn {
					for _, at := range byTraj {
						if !at.Carried {
							of[a].prompts++
							of[a].promptTokens += len(at.PromptTokens)
						}
					}
				}
			}
			return nil
		})
		if err != nil {
			return f, err
		}
		wall := time.Since(t0)
		f.Walls = append(f.Walls, wall)
		if best != 0 && wall >= best {
			continue
		}
		best, f.Generations = wall, st.Generations
		prompt, naive, gen, work = nil, nil, nil, engine.Stats{}
		for _, de := range engines {
			s := de.engine.Stats()
			work.Steps += s.Steps - de.before.Steps
			work.DecodeTime += s.DecodeTime - de.before.DecodeTime
			work.SampleTime += s.SampleTime - de.before.SampleTime
			prompt = append(prompt, s.PromptTokens-de.before.PromptTokens)
			naive = append(naive, s.NaivePromptTokens-de.before.NaivePromptTokens)
			gen = append(gen, s.GeneratedTokens-de.before.GeneratedTokens)
		}
	}
	for i, de := range engines {
		promptLen := max(1, de.promptTokens/max(1, de.prompts))
		rates, err := bareRates(de, cfg, seqCtx, promptLen)
		if err != nil {
			return f, err
		}
		f.Rates = append(f.Rates, rates)
		f.Bare = max(f.Bare, bareTime(prompt[i], gen[i], rates))
		f.BareNaive = max(f.BareNaive, bareTime(naive[i], gen[i], rates))
	}
	f.PromptTokens, f.NaivePromptTokens, f.GeneratedTokens = sum(prompt), sum(naive), sum(gen)
	f.Steps, f.DecodeTime, f.SampleTime = work.Steps, work.DecodeTime, work.SampleTime
	f.Efficiency = f.Bare.Seconds() / best.Seconds()
	f.Speedup = f.BareNaive.Seconds() / best.Seconds()
	return f, nil
}

func sum(xs []int64) int64 {
	var s int64
	for _, x := range xs {
		s += x
	}
	return s
}

// bareTime is how long the bare loop takes for the prompt and generated tokens.
func bareTime(prompt, gen int64, r BareRates) time.Duration {
	return time.Duration((float64(prompt)/r.PrefillTokS + float64(gen)/r.DecodeTokS) * float64(time.Second))
}

// bareRates times the bare loop on an engine's model, threads and slots: the best of
// cfg.Repeats runs each.
func bareRates(de *debateEngine, cfg DebateConfig, seqCtx, promptLen int) (BareRates, error) {
	r := BareRates{Model: de.label, Threads: de.threads, PromptLen: promptLen}
	l, err := newBareLoop(de.model, max(2, cfg.Slots), seqCtx, de.threads)
	if err != nil {
		return r, err
	}
	defer l.close()
	steps := min(cfg.MaxTokens, seqCtx-promptLen-1)
	for range cfg.Repeats {
		prefill, decode, err := l.rates(promptLen, steps)
		if err != nil {
			return r, err
		}
		r.PrefillTokS, r.DecodeTokS = max(r.PrefillTokS, prefill), max(r.DecodeTokS, decode)
	}
	if r.StreamCopy, err = l.copyTime(promptLen, 5); err != nil {
		return r, err
	}
	r.CopyPromptTkEqv = r.StreamCopy.Seconds() * r.PrefillTokS
	return r, nil
}

// rates times the prefill of a prompt of n tokens in each of the loop's k sequences,
// packed into batches as large as the loop takes, then steps decode steps of all k.
func (l *bareLoop) rates(n, steps int) (prefill, decode float64, err error) {
	if err := l.ctx.ClearMemory(); err != nil {
		return 0, 0, err
	}
	t0 := time.Now()
	l.batch.Clear()
	for s := 0; s < l.k; s++ {
		for i := range n {
			if l.batch.Len() == l.ctx.Params().NBatch {
				if err := l.ctx.Decode(l.batch); err != nil {
					return 0, 0, err
				}
				l.batch.Clear()
			}
			if _, err := l.batch.Add(int32(100+(i+s)%50), i, []int32{int32(s)}, i == n-1); err != nil {
				return 0, 0, err
			}
		}
	}
	if err := l.ctx.Decode(l.batch); err != nil {
		return 0, 0, err
	}
	prefill = float64(l.k*n) / time.Since(t0).Seconds()
	t0 = time.Now()
	for step := range steps {
		l.batch.Clear()
		for s := 0; s < l.k; s++ {
			if _, err := l.batch.Add(int32(100+(step+s)%50), n+step, []int32{int32(s)}, true); err != nil {
				return 0, 0, err
			}
		}
		if err := l.ctx.Decode(l.batch); err != nil {
			return 0, 0, err
		}
		for s := 0; s < l.k; s++ {
			row, err := l.ctx.Logits(s)
			if err != nil {
				return 0, 0, err
			}
			argmax(row)
		}
	}
	return prefill, float64(l.k*steps) / time.Since(t0).Seconds(), nil
}

// copyTime is what one KV stream copy adds to the next decode (llama.cpp copies the whole
// stream there): the best of reps one-token decodes after a copy, less the best without.
func (l *bareLoop) copyTime(n, reps int) (time.Duration, error) {
	if err := l.ctx.ClearMemory(); err != nil {
		return 0, err
	}
	if _, err := l.prefill(make([]int32, n), 0); err != nil {
		return 0, err
	}
	var plain, copied time.Duration
	for i := range 2 * reps {
		withCopy := i%2 == 1
		if withCopy {
			if err := l.ctx.SeqCopy(0, 1, -1, -1); err != nil {
				return 0, err
			}
		}
		l.batch.Clear()
		if _, err := l.batch.Add(100, n+i, []int32{0}, true); err != nil {
			return 0, err
		}
		t0 := time.Now()
		if err := l.ctx.Decode(l.batch); err != nil {
			return 0, err
		}
		if el := time.Since(t0); withCopy {
			copied = least(copied, el)
		} else {
			plain = least(plain, el)
		}
	}
	return max(0, copied-plain), nil
}

// least is the smaller of a best time so far (0: none yet) and a new one.
func least(best, d time.Duration) time.Duration {
	if best == 0 || d < best {
		return d
	}
	return best
}

// String formats the figures as Markdown.
func (f DebateFigures) String() string {
	var walls []string
	for _, w := range f.Walls {
		walls = append(walls, fmt.Sprintf("%.2f s", w.Seconds()))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| engines | generations | prompt tokens decoded of naive (shared) | generated | wall (each run) | steps | in llama_decode | in sampler | bare | efficiency | bare, naive prompts / wall |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d of %d (%.1f%%) | %d | %s | %d | %.2f s | %.2f s | %.2f s | %.2f | %.2f |\n\n", f.Engines, f.Generations,
		f.PromptTokens, f.NaivePromptTokens, 100*(1-float64(f.PromptTokens)/float64(max(1, f.NaivePromptTokens))),
		f.GeneratedTokens, strings.Join(walls, ", "), f.Steps, f.DecodeTime.Seconds(), f.SampleTime.Seconds(),
		f.Bare.Seconds(), f.Efficiency, f.Speedup)
	fmt.Fprintf(&b, "| model | threads | mean prompt | bare prefill tok/s | bare decode tok/s | KV stream copy |\n|---|---|---|---|---|---|\n")
	for _, r := range f.Rates {
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %.2f ms (%.1f prompt tokens) |\n", r.Model, r.Threads, r.PromptLen,
			r.PrefillTokS, r.DecodeTokS, float64(r.StreamCopy.Microseconds())/1000, r.CopyPromptTkEqv)
	}
	return b.String()
}

// DebateSection is the Markdown section of bench/RESULTS.md for a debate measured by the
// given command.
func DebateSection(command string, f DebateFigures) string {
	return fmt.Sprintf("## Whole debate vs bare llama.cpp loop\n\n"+
		"%s, on %s; KV f16; T=0.6, top-p 0.95; llama.cpp: %s\n\n"+
		"Command: `umad %s`\n\n"+
		"Efficiency: the bare loop's time for the prompt tokens decoded and the tokens generated, at its prefill and\n"+
		"decode rates on the same model, threads and slots, over the best debate wall time; the last column counts every\n"+
		"sample's whole prompt instead. A KV stream copy is what one adds to the next decode, in prompt tokens at the\n"+
		"bare prefill rate.\n\n%s",
		Today(), Machine(), strings.TrimSpace(llama.SystemInfo()), command, f)
}
