// Package bench measures umad's throughput against bare baselines run in the same
// process, and keeps the latest figures in bench/RESULTS.md.
package bench

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/sampler"
)

// RolloutConfig describes one rollout measurement.
type RolloutConfig struct {
	K            int // samples of one prompt, all decoded together
	PromptTokens int // prompt length; the content does not matter
	MaxTokens    int // every sample decodes exactly this many tokens
	Threads      int
	GPULayers    int // layers offloaded to the GPU (0: CPU only)
	Params       sampler.Params
	Repeats      int // best of this many runs
}

// RolloutFigures are the results of one measurement.
type RolloutFigures struct {
	K, PromptTokens, MaxTokens, Vocab int
	EngineTokS, BareTokS              float64 // generated tokens per second, prefill included
	Ratio                             float64 // engine / bare
	SamplerShare                      float64 // share of the engine's wall time spent sampling
	EngineDecodeShare                 float64 // share spent inside llama_decode
	PrefillTokensShared               int64   // prompt tokens sent to llama.cpp by the engine
	PrefillTokensUnshared             int64   // what decoding the prompt once per sample sends
	PrefillSharedTime                 time.Duration
	PrefillUnsharedTime               time.Duration
}

// Rollout measures, on the GGUF model at path, the engine against a bare llama.cpp loop (greedy argmax in Go, no
// log-probs) with the same model, batch shape and threads.
func Rollout(path string, cfg RolloutConfig) (RolloutFigures, error) {
	m, err := engine.LoadModel(path, engine.ModelParams{GPULayers: cfg.GPULayers})
	if err != nil {
		return RolloutFigures{}, err
	}
	defer m.Close()
	prompt := make([]int32, cfg.PromptTokens)
	for i := range prompt {
		prompt[i] = int32(100 + i%50) // ordinary tokens
	}
	f := RolloutFigures{K: cfg.K, PromptTokens: len(prompt), MaxTokens: cfg.MaxTokens, Vocab: m.NVocab()}
	if cfg.Repeats < 1 {
		cfg.Repeats = 1
	}
	seqCtx := len(prompt) + cfg.MaxTokens + 1
	e, err := engine.New(m, engine.Options{Slots: cfg.K, SeqContext: seqCtx, Threads: cfg.Threads, KVType: engine.KVF16})
	if err != nil {
		return f, err
	}
	defer e.Close()
	bare, err := newBareLoop(path, cfg.GPULayers, cfg.K, seqCtx, cfg.Threads)
	if err != nil {
		return f, err
	}
	defer bare.close()

	req := []engine.Request{{Prompt: prompt, K: cfg.K, MaxTokens: cfg.MaxTokens, Params: cfg.Params, Seed: 1, IgnoreEOG: true}}
	var bestEngine, bestBare time.Duration
	var share, decodeShare float64
	var prompt0 int64
	for r := 0; r < cfg.Repeats; r++ {
		before := e.Stats()
		t0 := time.Now()
		var rerr error
		if err := e.Generate(context.Background(), req, func(res engine.Result) { rerr = res.Err }); err != nil {
			return f, err
		}
		if rerr != nil {
			return f, rerr
		}
		el := time.Since(t0)
		after := e.Stats()
		if bestEngine == 0 || el < bestEngine {
			bestEngine = el
			share = float64(after.SampleTime-before.SampleTime) / float64(el)
			decodeShare = float64(after.DecodeTime-before.DecodeTime) / float64(el)
			prompt0 = after.PromptTokens - before.PromptTokens
		}
		el, err = bare.run(prompt, cfg.MaxTokens)
		if err != nil {
			return f, err
		}
		if bestBare == 0 || el < bestBare {
			bestBare = el
		}
	}
	gen := float64(cfg.K * cfg.MaxTokens)
	f.EngineTokS = gen / bestEngine.Seconds()
	f.BareTokS = gen / bestBare.Seconds()
	f.Ratio = f.EngineTokS / f.BareTokS
	f.SamplerShare, f.EngineDecodeShare = share, decodeShare
	f.PrefillTokensShared = prompt0
	f.PrefillTokensUnshared = int64(cfg.K * len(prompt))
	f.PrefillSharedTime, f.PrefillUnsharedTime, err = bare.prefillTimes(prompt, cfg.Repeats)
	return f, err
}

// bareLoop is the baseline: the plainest batched decode loop llama.cpp allows, on its own
// load of the model (the engine keeps its llama.cpp model to itself).
type bareLoop struct {
	model *llama.Model
	ctx   *llama.Context
	batch *llama.Batch
	k     int
}

func newBareLoop(path string, gpuLayers, k, seqCtx, threads int) (*bareLoop, error) {
	m, err := llama.LoadModel(path, llama.ModelParams{GPULayers: gpuLayers})
	if err != nil {
		return nil, err
	}
	ctx, err := m.NewContext(llama.ContextParams{NCtx: k * seqCtx, NBatch: max(2048, k), NSeqMax: k,
		Threads: threads, KVType: llama.KVF16}) // one KV stream per sequence, as the engine
	if err != nil {
		m.Close()
		return nil, err
	}
	b, err := llama.NewBatch(max(2048, k), k)
	if err != nil {
		ctx.Close()
		m.Close()
		return nil, err
	}
	return &bareLoop{model: m, ctx: ctx, batch: b, k: k}, nil
}

func (l *bareLoop) close() {
	l.batch.Close()
	l.ctx.Close()
	l.model.Close()
}

// prefill decodes the prompt in sequence seq and returns the last row's argmax.
func (l *bareLoop) prefill(prompt []int32, seq int32) (int32, error) {
	l.batch.Clear()
	for i, t := range prompt {
		if _, err := l.batch.Add(t, i, []int32{seq}, i == len(prompt)-1); err != nil {
			return 0, err
		}
	}
	if err := l.ctx.Decode(l.batch); err != nil {
		return 0, err
	}
	row, err := l.ctx.Logits(len(prompt) - 1)
	if err != nil {
		return 0, err
	}
	return argmax(row), nil
}

// share gives every other sequence a copy of sequence 0's KV stream (llama.cpp applies
// the copies at the next decode).
func (l *bareLoop) share() error {
	for s := 1; s < l.k; s++ {
		if err := l.ctx.SeqCopy(0, s, -1, -1); err != nil {
			return err
		}
	}
	return nil
}

// run decodes k sequences of n tokens each after one shared prefill.
func (l *bareLoop) run(prompt []int32, n int) (time.Duration, error) {
	if err := l.ctx.ClearMemory(); err != nil {
		return 0, err
	}
	t0 := time.Now()
	first, err := l.prefill(prompt, 0)
	if err != nil {
		return 0, err
	}
	if err := l.share(); err != nil {
		return 0, err
	}
	last := make([]int32, l.k)
	for i := range last {
		last[i] = first
	}
	for step := 1; step < n; step++ {
		if err := l.decodeStep(last, len(prompt)+step-1); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
}

// decodeStep feeds tokens[s] at position pos to each sequence s and leaves each row's
// argmax in tokens[s].
func (l *bareLoop) decodeStep(tokens []int32, pos int) error {
	l.batch.Clear()
	for s := range l.k {
		if _, err := l.batch.Add(tokens[s], pos, []int32{int32(s)}, true); err != nil {
			return err
		}
	}
	if err := l.ctx.Decode(l.batch); err != nil {
		return err
	}
	for s := range l.k {
		row, err := l.ctx.Logits(s)
		if err != nil {
			return err
		}
		tokens[s] = argmax(row)
	}
	return nil
}

// prefillTimes times decoding the prompt once and copying it to the k sequences (the
// copies themselves run at the next decode, not timed here) against decoding it once per
// sequence.
func (l *bareLoop) prefillTimes(prompt []int32, repeats int) (shared, unshared time.Duration, err error) {
	for r := 0; r < repeats; r++ {
		if err := l.ctx.ClearMemory(); err != nil {
			return 0, 0, err
		}
		t0 := time.Now()
		if _, err := l.prefill(prompt, 0); err != nil {
			return 0, 0, err
		}
		if err := l.share(); err != nil {
			return 0, 0, err
		}
		if el := time.Since(t0); shared == 0 || el < shared {
			shared = el
		}
		if err := l.ctx.ClearMemory(); err != nil {
			return 0, 0, err
		}
		t0 = time.Now()
		for s := range l.k {
			if _, err := l.prefill(prompt, int32(s)); err != nil {
				return 0, 0, err
			}
		}
		if el := time.Since(t0); unshared == 0 || el < unshared {
			unshared = el
		}
	}
	return shared, unshared, nil
}

func argmax(row []float32) int32 {
	best := 0
	for i, v := range row {
		if v > row[best] {
			best = i
		}
	}
	return int32(best)
}

// String formats the figures as a table row.
func (f RolloutFigures) String() string {
	return fmt.Sprintf("| %d | %d | %d | %d | %.0f | %.0f | %.2fx | %.1f%% | %d vs %d | %.1f ms vs %.1f ms |",
		f.Vocab, f.K, f.PromptTokens, f.MaxTokens, f.EngineTokS, f.BareTokS, f.Ratio, 100*f.SamplerShare,
		f.PrefillTokensShared, f.PrefillTokensUnshared,
		float64(f.PrefillSharedTime.Microseconds())/1000, float64(f.PrefillUnsharedTime.Microseconds())/1000)
}

// RolloutSection is the Markdown section of bench/RESULTS.md for rollout rows measured on
// device (CPU, or the GPU's name) with the given llama.cpp threads (0: physical cores) and
// repeats, by the given command.
func RolloutSection(device string, threads, repeats int, command string, rows []string) string {
	if threads == 0 {
		threads = llama.PhysicalCores()
	}
	return fmt.Sprintf("## Rollout engine vs bare llama.cpp loop ("+device+")\n\n"+
		"%s, on %s; %d llama.cpp threads; KV f16; llama.cpp: %s\n\n"+
		"Command: `umad %s`\n\n"+
		"Engine: T=0.6, top-p 0.95, log-probs and entropies over the full vocabulary. Bare loop: greedy argmax only.\n"+
		"Tokens/s count generated tokens, prefill included; best of %d runs. Prefill columns: prompt tokens sent to\n"+
		"llama.cpp by the engine vs decoding the prompt once per sample, and the bare times of both.\n\n"+
		"| model | vocab | K | prompt | tokens | engine tok/s | bare tok/s | engine/bare | sampler share | prefill tokens (shared vs not) | prefill time (shared vs not) |\n"+
		"|---|---|---|---|---|---|---|---|---|---|---|\n%s\n",
		Today(), Machine(), threads, strings.TrimSpace(llama.SystemInfo()), command, repeats, strings.Join(rows, "\n"))
}
