package cli

import (
	"errors"
	"fmt"
	"runtime"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/sampler"
)

// llamaFlags are the llama.cpp settings every command that runs a model shares.
func llamaFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "threads", Usage: "llama.cpp threads (n_threads and n_threads_batch); 0 = physical cores"},
		&ucli.IntFlag{Name: "gpu-layers", Usage: "layers to offload to a GPU backend (0 = CPU only)"},
		&ucli.StringFlag{Name: "kv-type", Value: "f16", Usage: "KV-cache type: f16, f32 (exact log-probs) or q8_0"},
		&ucli.StringFlag{Name: "flash-attn", Value: "auto", Usage: "flash attention: auto, on or off (off for exact log-probs)"},
		&ucli.IntFlag{Name: "ctx", Value: 4096, Usage: "most tokens per sequence, prompt plus generation"},
	}
}

// samplingFlags are the sampling parameters, with the paper's defaults.
func samplingFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.Float64Flag{Name: "temperature", Aliases: []string{"t"}, Value: 0.6, Usage: "sampling temperature; 0 = greedy"},
		&ucli.Float64Flag{Name: "top-p", Value: 0.95, Usage: "nucleus sampling mass (1 = off)"},
		&ucli.IntFlag{Name: "top-k", Usage: "keep the k most likely tokens (0 = off)"},
		&ucli.Float64Flag{Name: "min-p", Usage: "drop tokens below this fraction of the top probability (0 = off)"},
		&ucli.IntFlag{Name: "max-tokens", Value: 2048, Usage: "most new tokens per sample"},
		&ucli.Uint64Flag{Name: "seed", Value: 1, Usage: "random seed; the same seed gives the same samples"},
	}
}

func samplingParams(c *ucli.Context) (sampler.Params, error) {
	p := sampler.Params{
		Temperature: c.Float64("temperature"),
		TopP:        c.Float64("top-p"),
		TopK:        c.Int("top-k"),
		MinP:        c.Float64("min-p"),
	}
	return p, p.Validate()
}

// engineOptions reads the llama.cpp flags.
func engineOptions(c *ucli.Context, slots int) (engine.Options, error) {
	if err := checkThreads("threads", c.Int("threads")); err != nil {
		return engine.Options{}, err
	}
	if c.Int("ctx") < 2 {
		return engine.Options{}, fmt.Errorf("--ctx must be at least 2, got %d", c.Int("ctx"))
	}
	return engine.ParseOptions(slots, c.Int("ctx"), c.Int("threads"), c.String("kv-type"), c.String("flash-attn"))
}

// checkThreads validates a thread-count flag: 0 (the default) or 1 to 4x the logical CPUs
// (more threads only spin; llama.cpp asserts past engine.MaxThreads and hangs).
func checkThreads(flag string, n int) error {
	if limit := min(4*runtime.NumCPU(), engine.MaxThreads); n < 0 || n > limit {
		return fmt.Errorf("--%s must be 0 (the default) or 1 to %d (4x the logical CPUs), got %d", flag, limit, n)
	}
	return nil
}

// checkContext refuses a context or response length n, set by flag, longer than the
// trained context of the model at path (llama.cpp's n_ctx_train, max_position_embeddings).
func checkContext(flag string, n, trained int, path string) error {
	if trained > 0 && n > trained {
		return fmt.Errorf("%s %d is more than the %d tokens of context %s was trained with", flag, n, trained, path)
	}
	return nil
}

// newEngine makes an engine; when its KV cache would not fit in memory, the error names
// what set the context (flags).
func newEngine(m *engine.Model, opt engine.Options, what string) (*engine.Engine, error) {
	e, err := m.NewEngine(opt)
	if errors.Is(err, engine.ErrNoMemory) {
		return nil, fmt.Errorf("%s (%d tokens per sequence) with %d slots: %w", what, opt.SeqContext, opt.Slots, err)
	}
	return e, err
}
