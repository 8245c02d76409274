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
	"github.com/umad-dev/umad/debate"
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
	// Deterministic steps the engines on one clock (debate.Config).
	Deterministic bool
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
	// tokens generated, each priced at its position by the bare loop's cost models on the
	// same model and threads (engines run concurrently: the slowest engine's time);
	// BareNaive the same for every sample's whole prompt from position 0. BareMeanDepth
	// prices every token at the bare rates of a mean-length prompt from position 0, which
	// undercounts the deeper tokens that prompt sharing leaves to decode.
	Bare, BareNaive, BareMeanDepth time.Duration
	// Efficiency is Bare over the best wall time, Speedup BareNaive over it, and
	// MeanDepthEfficiency BareMeanDepth over it.
	Efficiency, Speedup, MeanDepthEfficiency float64
	Rates                                    []BareRates // per engine
}

// BareRates are a bare loop's throughput on one model.
type BareRates struct {
	Model       string
	Threads     int
	PromptLen   int     // prompt length timed: the engine's mean prompt in the debate
	PrefillTokS float64 // prompt tokens per second, Slots prompts in batches of 2048 tokens
	DecodeTokS  float64 // tokens per second, Slots sequences one token a step
	// Prefill and Decode price a token by its position, fitted to the bare loop's times
	// at two depths: the prompt from 0, then as many tokens again after it.
	Prefill, Decode CostModel
	StreamCopy      time.Duration
	CopyPromptTkEqv float64 // StreamCopy in prompt tokens at PrefillTokS
}

// debateEngine is one distinct model of a debate with its engine.
type debateEngine struct {
	label   string
	path    string
	model   *engine.Model
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
	var agents []debate.Agent
	var of []*debateEngine // each agent's
	for i, p := range cfg.Agents {
		de := byPath[p]
		if de == nil {
			m, err := engine.LoadModel(p, engine.ModelParams{GPULayers: cfg.GPULayers})
			if err != nil {
				return f, err
			}
			threads := cfg.Threads
			if threads == 0 {
				threads = engine.SharedThreads(len(distinct)) // the engines decode concurrently
			}
			e, err := engine.New(m, engine.Options{Slots: cfg.Slots, SeqContext: seqCtx, Threads: threads, KVType: engine.KVF16})
			if err != nil {
				m.Close()
				return f, err
			}
			label := filepath.Base(p)
			if i < len(cfg.Labels) {
				label = cfg.Labels[i]
			}
			de = &debateEngine{label: label, path: p, model: m, engine: e, threads: threads}
			byPath[p] = de
			engines = append(engines, de)
		}
		format, err := chat.Resolve(de.model.ChatTemplate(), "")
		if err != nil {
			return f, fmt.Errorf("%s: %w", p, err)
		}
		of = append(of, de)
		agents = append(agents, debate.Agent{Name: fmt.Sprintf("agent%d", i), Generator: de.engine, Format: format,
			Params: cfg.Params, MaxTokens: cfg.MaxTokens, Seed: 1})
	}
	f.Engines = len(engines)
	problems := data.Synthetic(cfg.Problems, 1)
	dcfg := debate.Config{Agents: agents, Turns: cfg.Turns, K: cfg.K, PromptLimit: cfg.PromptLimit, Deterministic: cfg.Deterministic}
	var best time.Duration
	var work []engine.Stats // per engine, of the best run
	for r := 0; r < cfg.Repeats; r++ {
		for _, de := range engines {
			de.before = de.engine.Stats()
		}
		t0 := time.Now()
		st, err := debate.Run(context.Background(), dcfg, problems, nil, func(rec debate.Record) error {
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
		work = work[:0]
		for _, de := range engines {
			work = append(work, statsSince(de.engine.Stats(), de.before))
		}
	}
	for i, de := range engines {
		promptLen := max(1, de.promptTokens/max(1, de.prompts))
		rates, err := bareRates(de, cfg, seqCtx, promptLen)
		if err != nil {
			return f, err
		}
		f.Rates = append(f.Rates, rates)
		w := work[i]
		f.Bare = max(f.Bare, seconds(rates.Prefill.time(w.PromptTokens, w.PromptPositions)+
			rates.Decode.time(w.GeneratedTokens, w.GeneratedPositions)))
		f.BareNaive = max(f.BareNaive, seconds(rates.Prefill.time(w.NaivePromptTokens, w.NaivePromptPositions)+
			rates.Decode.time(w.GeneratedTokens, w.GeneratedPositions)))
		f.BareMeanDepth = max(f.BareMeanDepth, seconds(float64(w.PromptTokens)/rates.PrefillTokS+
			float64(w.GeneratedTokens)/rates.DecodeTokS))
		f.PromptTokens += w.PromptTokens
		f.NaivePromptTokens += w.NaivePromptTokens
		f.GeneratedTokens += w.GeneratedTokens
		f.Steps += w.Steps
		f.DecodeTime += w.DecodeTime
		f.SampleTime += w.SampleTime
	}
	f.Efficiency = f.Bare.Seconds() / best.Seconds()
	f.Speedup = f.BareNaive.Seconds() / best.Seconds()
	f.MeanDepthEfficiency = f.BareMeanDepth.Seconds() / best.Seconds()
	return f, nil
}

// statsSince is the work counted between two snapshots of an engine's stats.
func statsSince(now, before engine.Stats) engine.Stats {
	return engine.Stats{
		Steps:                now.Steps - before.Steps,
		PromptTokens:         now.PromptTokens - before.PromptTokens,
		NaivePromptTokens:    now.NaivePromptTokens - before.NaivePromptTokens,
		GeneratedTokens:      now.GeneratedTokens - before.GeneratedTokens,
		PromptPositions:      now.PromptPositions - before.PromptPositions,
		NaivePromptPositions: now.NaivePromptPositions - before.NaivePromptPositions,
		GeneratedPositions:   now.GeneratedPositions - before.GeneratedPositions,
		Moves:                now.Moves - before.Moves,
		DecodeTime:           now.DecodeTime - before.DecodeTime,
		SampleTime:           now.SampleTime - before.SampleTime,
	}
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// CostModel prices a token at position p at Base + PerPos*p seconds: past the weights'
// fixed cost, a token attends over every cell before it.
type CostModel struct{ Base, PerPos float64 }

// time is the cost of tokens whose positions sum to positions, in seconds.
func (c CostModel) time(tokens, positions int64) float64 {
	return c.Base*float64(tokens) + c.PerPos*float64(positions)
}

// fitCost fits a cost model to two timings, each of tokens whose positions sum as given.
// A slope the noise made negative is taken as 0.
func fitCost(t1 time.Duration, n1, p1 int64, t2 time.Duration, n2, p2 int64) CostModel {
	s1, s2 := t1.Seconds(), t2.Seconds()
	var c CostModel
	if det := float64(p2)*float64(n1) - float64(p1)*float64(n2); det > 0 {
		c.PerPos = max(0, (s2*float64(n1)-s1*float64(n2))/det)
	}
	c.Base = max(0, (s1-c.PerPos*float64(p1))/float64(n1))
	return c
}

// bareRates times the bare loop on an engine's model, threads and slots: the best of
// cfg.Repeats runs of each timing.
func bareRates(de *debateEngine, cfg DebateConfig, seqCtx, promptLen int) (BareRates, error) {
	r := BareRates{Model: de.label, Threads: de.threads, PromptLen: promptLen}
	n, steps := promptLen, cfg.MaxTokens
	k := max(2, cfg.Slots)
	l, err := newBareLoop(de.path, cfg.GPULayers, k, max(seqCtx, 2*n+2*steps+1), de.threads)
	if err != nil {
		return r, err
	}
	defer l.close()
	var best bareTimes
	for range cfg.Repeats {
		t, err := l.times(n, steps)
		if err != nil {
			return r, err
		}
		best = bareTimes{least(best.prefill0, t.prefill0), least(best.decode0, t.decode0),
			least(best.prefill1, t.prefill1), least(best.decode1, t.decode1)}
	}
	kn, ks := int64(k*n), int64(k*steps)
	r.PrefillTokS = float64(kn) / best.prefill0.Seconds()
	r.DecodeTokS = float64(ks) / best.decode0.Seconds()
	r.Prefill = fitCost(best.prefill0, kn, int64(k)*positionSum(0, n), best.prefill1, kn, int64(k)*positionSum(n+steps, 2*n+steps))
	r.Decode = fitCost(best.decode0, ks, int64(k)*positionSum(n, n+steps), best.decode1, ks, int64(k)*positionSum(2*n+steps, 2*n+2*steps))
	if r.StreamCopy, err = l.copyTime(promptLen, 5); err != nil {
		return r, err
	}
	r.CopyPromptTkEqv = r.StreamCopy.Seconds() * r.PrefillTokS
	return r, nil
}

// positionSum is lo + (lo+1) + ... + (hi-1).
func positionSum(lo, hi int) int64 { return int64(hi)*int64(hi-1)/2 - int64(lo)*int64(lo-1)/2 }

// bareTimes are the bare loop's timings on its k sequences at two depths: a prompt of n
// tokens from position 0, then decode steps; then n more prompt tokens, then as many steps.
type bareTimes struct{ prefill0, decode0, prefill1, decode1 time.Duration }

func (l *bareLoop) times(n, steps int) (t bareTimes, err error) {
	if err := l.ctx.ClearMemory(); err != nil {
		return t, err
	}
	if t.prefill0, err = l.timePrefill(0, n); err != nil {
		return t, err
	}
	if t.decode0, err = l.timeDecode(n, steps); err != nil {
		return t, err
	}
	if t.prefill1, err = l.timePrefill(n+steps, n); err != nil {
		return t, err
	}
	t.decode1, err = l.timeDecode(2*n+steps, steps)
	return t, err
}

// timePrefill times n prompt tokens from position from in each of the loop's k
// sequences, packed into batches as large as the loop takes.
func (l *bareLoop) timePrefill(from, n int) (time.Duration, error) {
	t0 := time.Now()
	l.batch.Clear()
	for s := 0; s < l.k; s++ {
		for i := range n {
			if l.batch.Len() == l.ctx.Params().NBatch {
				if err := l.ctx.Decode(l.batch); err != nil {
					return 0, err
				}
				l.batch.Clear()
			}
			if _, err := l.batch.Add(int32(100+(i+s)%50), from+i, []int32{int32(s)}, i == n-1); err != nil {
				return 0, err
			}
		}
	}
	if err := l.ctx.Decode(l.batch); err != nil {
		return 0, err
	}
	return time.Since(t0), nil
}

// timeDecode times steps decode steps of all k sequences from position from, with an
// argmax of every row.
func (l *bareLoop) timeDecode(from, steps int) (time.Duration, error) {
	tokens := make([]int32, l.k)
	for s := range tokens {
		tokens[s] = int32(100 + s%50)
	}
	t0 := time.Now()
	for step := range steps {
		if err := l.decodeStep(tokens, from+step); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
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
	fmt.Fprintf(&b, "| engines | generations | prompt tokens decoded of naive (shared) | generated | wall (each run) | steps | in llama_decode | in sampler | bare | efficiency | bare, naive prompts / wall | bare at mean-prompt rates / wall |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| %d | %d | %d of %d (%.1f%%) | %d | %s | %d | %.2f s | %.2f s | %.2f s | %.2f | %.2f | %.2f |\n\n", f.Engines, f.Generations,
		f.PromptTokens, f.NaivePromptTokens, 100*(1-float64(f.PromptTokens)/float64(max(1, f.NaivePromptTokens))),
		f.GeneratedTokens, strings.Join(walls, ", "), f.Steps, f.DecodeTime.Seconds(), f.SampleTime.Seconds(),
		f.Bare.Seconds(), f.Efficiency, f.Speedup, f.MeanDepthEfficiency)
	fmt.Fprintf(&b, "| model | threads | mean prompt | bare prefill tok/s | bare decode tok/s | prefill us/token at position 0, 500 | decode us/token at 0, 500 | KV stream copy |\n|---|---|---|---|---|---|---|---|\n")
	us := func(c CostModel, pos float64) float64 { return 1e6 * (c.Base + c.PerPos*pos) }
	for _, r := range f.Rates {
		fmt.Fprintf(&b, "| %s | %d | %d | %.0f | %.0f | %.1f, %.1f | %.1f, %.1f | %.2f ms (%.1f prompt tokens) |\n", r.Model, r.Threads, r.PromptLen,
			r.PrefillTokS, r.DecodeTokS, us(r.Prefill, 0), us(r.Prefill, 500), us(r.Decode, 0), us(r.Decode, 500),
			float64(r.StreamCopy.Microseconds())/1000, r.CopyPromptTkEqv)
	}
	return b.String()
}

// DebateSection is the Markdown section of bench/RESULTS.md for a debate measured by the
// given command.
func DebateSection(command string, f DebateFigures) string {
	return fmt.Sprintf("## Whole debate vs bare llama.cpp loop\n\n"+
		"%s, on %s; KV f16; T=0.6, top-p 0.95; llama.cpp: %s\n\n"+
		"Command: `umad %s`\n\n"+
		"Efficiency: the bare loop's time for the prompt tokens decoded and the tokens generated, over the best debate\n"+
		"wall time. The bare loop runs on the same model, threads and slots; a token's cost grows with its position (it\n"+
		"attends over every cell before it), so each token is priced at its position, by a line fitted to the bare\n"+
		"loop's times for a mean-length prompt from position 0, decode steps after it, as many prompt tokens again,\n"+
		"and decode steps after those. \"Naive prompts\" prices every sample's whole prompt from position 0 instead\n"+
		"(what prompt sharing saves). The last column prices every token at the bare rates of the first prompt and\n"+
		"decode steps (the measure before 2026-11-24), which undercounts the deeper prompt tokens that sharing leaves.\n"+
		"A KV stream copy is what one adds to the next decode, in prompt tokens at the bare prefill rate.\n\n%s",
		Today(), Machine(), strings.TrimSpace(llama.SystemInfo()), command, f)
}
