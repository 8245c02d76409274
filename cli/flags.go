package cli

// The flag sets several commands share (llama.cpp, sampling, libtorch, the built-in problems,
// --agent) and what reads them.

import (
	"errors"
	"fmt"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainspec"
)

// llamaFlags are the llama.cpp settings every command that runs a model shares.
func llamaFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "threads", Usage: "llama.cpp threads (n_threads and n_threads_batch); 0 = physical cores"},
		&ucli.IntFlag{Name: "gpu-layers", DefaultText: "all with a GPU, else 0", Usage: "layers to offload to the GPU (0 = CPU only; umad env shows the GPUs)"},
		&ucli.StringFlag{Name: "devices", Aliases: []string{"device"}, DefaultText: "all GPUs", Usage: "GPUs llama.cpp's offloaded layers (the rollouts) run on, by the names umad env lists, comma-separated (CUDA0,CUDA1); the trainer's GPU is --train-device"},
		&ucli.StringFlag{Name: "kv-type", Value: run.DefaultKVType, Usage: "KV-cache type: f16, f32 (exact log-probs) or q8_0"},
		&ucli.StringFlag{Name: "flash-attn", Value: run.DefaultFlashAttn, Usage: "flash attention: auto, on or off (off for exact log-probs)"},
		&ucli.IntFlag{Name: "ctx", Value: run.DefaultCtx, Usage: "most tokens per sequence, prompt plus generation"},
	}
}

// deterministicFlag is --deterministic of umad debate, umad train and umad bench debate.
func deterministicFlag() ucli.Flag {
	return &ucli.BoolFlag{Name: "deterministic", Usage: "step the agents' engines on one clock, so that batches follow the debate, not the timing: needed for the same bytes only with --gpu-layers (the CPU's kernels give a sequence the same logits whatever its batch; README, Debates)"}
}

// debatePromptFlags shape the debate messages of turns t >= 1 (debate.Prompt), in
// umad debate and in umad train's rollouts and validation alike.
func debatePromptFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.BoolFlag{Name: "no-mask", Usage: "show peers' final answers instead of masking them as <answer>"},
		&ucli.BoolFlag{Name: "full-history", Usage: "show every earlier round, not only the previous one"},
		&ucli.BoolFlag{Name: "anonymise", Usage: "label agents in a random order per trajectory and turn"},
	}
}

// samplingFlags are the sampling parameters, with the paper's defaults.
func samplingFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.Float64Flag{Name: "temperature", Aliases: []string{"t"}, Value: run.DefaultAgent.Params.Temperature, Usage: "sampling temperature; 0 = greedy"},
		&ucli.Float64Flag{Name: "top-p", Value: run.DefaultAgent.Params.TopP, Usage: "nucleus sampling mass (1 = off)"},
		&ucli.IntFlag{Name: "top-k", Usage: "keep the k most likely tokens (0 = off)"},
		&ucli.Float64Flag{Name: "min-p", Usage: "drop tokens below this fraction of the top probability (0 = off)"},
		&ucli.IntFlag{Name: "max-tokens", Value: run.DefaultAgent.MaxTokens, Usage: "most new tokens per sample"},
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
	return run.EngineOptions(slots, c.Int("ctx"), c.Int("threads"), c.String("kv-type"), c.String("flash-attn"))
}

// gpuLayers reads --gpu-layers: every layer on a machine with a GPU unless set.
func gpuLayers(c *ucli.Context) (int, error) {
	return run.GPULayers(c.Int("gpu-layers"), c.IsSet("gpu-layers"))
}

// placement reads --gpu-layers and --devices.
func placement(c *ucli.Context) (engine.Placement, error) {
	return run.PlaceEngines(c.Int("gpu-layers"), c.IsSet("gpu-layers"), c.String("devices"))
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

// trainDeviceFlag is where libtorch (the trainer, or score --model) runs. llama.cpp's GPUs
// are --gpu-layers and --devices; the two may share one GPU.
func trainDeviceFlag(what string) ucli.Flag {
	return &ucli.StringFlag{Name: "train-device", Aliases: []string{"torch-device"}, Value: trainspec.DeviceAuto,
		Usage: "where libtorch " + what + ": cpu, cuda (GPU 0), cuda:N, or auto (cuda:0 when the plugin's libtorch sees a GPU, else cpu; umad env shows what it sees). " +
			"Not the rollout GPUs: llama.cpp's are --gpu-layers and --devices"}
}

// torchFlags are the libtorch settings of the commands that train.
func torchFlags() []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "torch-threads", Usage: "libtorch threads; 0 = all CPUs"},
		&ucli.StringFlag{Name: "torch-plugin", EnvVars: []string{torch.PluginEnv}, Usage: "path to " + torch.PluginName},
		trainDeviceFlag("trains"),
		&ucli.StringFlag{Name: "dtype", Value: string(trainspec.PrecisionF32), Usage: "trainer precision: f32, or bf16 (mixed precision on any device: f32 master weights, gradients and AdamW state, weights cast to bf16 where used, norms and softmax in f32; frozen weights such as the reference model or a LoRA base held in bf16)"},
		&ucli.BoolFlag{Name: "grad-checkpoint", Usage: "keep only each layer's input for the backward and recompute the layer (less memory, about a third more compute)"},
	}
}

// openTorch loads the plugin with threads libtorch threads (--torch-threads, or a share of
// the cores) and resolves --train-device and --dtype into model options; a GPU the plugin
// cannot use is refused here, before anything loads.
func openTorch(c *ucli.Context, threads int) (*torch.Runtime, torch.ModelOptions, error) {
	return run.OpenTorch(c.String("torch-plugin"), c.String("train-device"), c.String("dtype"), c.Bool("grad-checkpoint"), threads)
}

// syntheticFlags set the difficulty of the built-in problems.
func syntheticFlags() []ucli.Flag {
	d := data.DefaultSynthetic
	return []ucli.Flag{
		&ucli.IntFlag{Name: "synthetic-terms", Value: d.Terms, Usage: "operands per synthetic problem"},
		&ucli.IntFlag{Name: "synthetic-max", Value: d.MaxOperand, Usage: "largest synthetic operand"},
		&ucli.StringFlag{Name: "synthetic-ops", Value: d.Ops, Usage: "synthetic operators, any of +-*"},
		&ucli.Uint64Flag{Name: "synthetic-seed", Value: 1, Usage: "seed of the synthetic problems (umad train validates on seed + 1000003)"},
		&ucli.StringFlag{Name: "synthetic-task", Value: data.TaskArithmetic, Usage: "built-in task: " + data.TaskArithmetic +
			" (operators drawn anew within an expression) or " + data.TaskExperts + " (one operator per problem, its kind: sums, differences or " +
			"products, for agents warm-started each on one kind with umad sft --expert)"},
	}
}

// checkSynthetic refuses a --synthetic count below 1, which otherwise failed later with a
// message about something else.
func checkSynthetic(c *ucli.Context) error {
	return run.CheckSynthetic(c.Int("synthetic"), c.IsSet("synthetic"))
}

// syntheticSet is the built-in problems' difficulty from the flags.
func syntheticSet(c *ucli.Context) data.SyntheticConfig {
	return run.SyntheticSet(data.SyntheticConfig{Terms: c.Int("synthetic-terms"), MaxOperand: c.Int("synthetic-max"),
		Ops: c.String("synthetic-ops"), Task: c.String("synthetic-task")})
}

// hubDirs is hfDir as a hubDir.
func hubDirs(c *ucli.Context) run.HubDir {
	return func(arg string) (string, string, error) {
		dir, snap, err := hfDir(c, arg)
		if err != nil || snap == nil {
			return dir, "", err
		}
		return dir, snap.ID(), nil
	}
}

// loraFlags are the LoRA settings of train and sft; dropout's default differs (see
// loraDropoutHelp).
func loraFlags(dropout float64, dropoutHelp string) []ucli.Flag {
	return []ucli.Flag{
		&ucli.IntFlag{Name: "lora-rank", Usage: "train rank-R LoRA adapters on a frozen base instead of every weight (0 = full fine-tuning); 8-64 is usual, 32 for a 3B model"},
		&ucli.Float64Flag{Name: "lora-alpha", Usage: "LoRA scale numerator: adapters add alpha/rank * B A x (default: 2 x rank)"},
		&ucli.StringFlag{Name: "lora-targets", Value: strings.Join(trainspec.LoRATargets, ","), Usage: "projections that get adapters: any of " + strings.Join(trainspec.LoRATargets, ",") + " (or q_proj...), or all"},
		&ucli.Float64Flag{Name: "lora-dropout", Value: dropout, Usage: dropoutHelp},
		&ucli.BoolFlag{Name: "lora-bf16-base", Usage: "keep the frozen base in bf16 even when the checkpoint is fp32 (rounds it; halves its memory); a bf16 checkpoint's base stays bf16 anyway, and so does any base under --dtype bf16"},
	}
}

// loraSettings reads the LoRA flags (run.LoRARequest).
func loraSettings(c *ucli.Context, fromAdapter bool) (trainspec.LoRA, error) {
	return run.LoRARequest{Rank: c.Int("lora-rank"), Alpha: c.Float64("lora-alpha"), Dropout: c.Float64("lora-dropout"),
		Targets: c.String("lora-targets"), BF16Base: c.Bool("lora-bf16-base"), Given: c.IsSet}.Settings(fromAdapter)
}
