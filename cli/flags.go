package cli

// The flag sets several commands share (llama.cpp, sampling, libtorch, the built-in problems,
// --agent) and what reads them.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	ucli "github.com/urfave/cli/v2"

	"github.com/umad-dev/umad/cgo/torch"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/trainer"
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
	if err := checkThreads("threads", c.Int("threads")); err != nil {
		return engine.Options{}, err
	}
	if err := engine.CheckSlots(slots); err != nil {
		return engine.Options{}, fmt.Errorf("--slots: %w", err)
	}
	if c.Int("ctx") < 2 {
		return engine.Options{}, fmt.Errorf("--ctx must be at least 2, got %d", c.Int("ctx"))
	}
	return engine.ParseOptions(slots, c.Int("ctx"), c.Int("threads"), c.String("kv-type"), c.String("flash-attn"))
}

// gpuLayers reads --gpu-layers: every layer on a machine with a GPU unless set.
func gpuLayers(c *ucli.Context) (int, error) {
	return layersOf(c.Int("gpu-layers"), c.IsSet("gpu-layers"))
}

// layersOf is the layers to offload, n when given, else every layer with a GPU.
func layersOf(n int, given bool) (int, error) {
	if !given {
		return engine.DefaultGPULayers(), nil
	}
	if n >= 0 {
		return n, nil
	}
	return 0, fmt.Errorf("--gpu-layers must be 0 or more, got %d", n)
}

// placement reads --gpu-layers and --devices.
func placement(c *ucli.Context) (engine.Placement, error) {
	return placeEngines(c.Int("gpu-layers"), c.IsSet("gpu-layers"), c.String("devices"))
}

// placeEngines is the engines' placement: layersOf's layers on the devices listed
// (comma-separated).
func placeEngines(layers int, given bool, devices string) (engine.Placement, error) {
	n, err := layersOf(layers, given)
	if err != nil {
		return engine.Placement{}, err
	}
	p := engine.Placement{GPULayers: n}
	for _, d := range strings.Split(devices, ",") {
		if d = strings.TrimSpace(d); d != "" {
			p.Devices = append(p.Devices, d)
		}
	}
	if err := engine.CheckDevices(p.Devices); err != nil {
		return p, fmt.Errorf("--devices: %w", err)
	}
	return p, nil
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

// checkLengths checks what a sequence of an agent holds against the model at path, trained
// with a context of trained tokens: its response (maxTokens) must fit that context, and
// --prompt-limit plus the response must fit --ctx when it is set, else, when --prompt-limit is
// set, the trained context (each slot's KV cache has room for both: a limit of a million
// tokens allocated gigabytes before llama.cpp failed). The default limit is not held to a
// short trained context: a sequence may run past it, as with llama.cpp.
func checkLengths(c *ucli.Context, maxTokens, trained int, path string) error {
	if err := checkContext("--max-tokens", maxTokens, trained, path); err != nil {
		return err
	}
	limit := c.Int("prompt-limit")
	switch {
	case limit < 1:
		return fmt.Errorf("--prompt-limit must be at least 1, got %d", limit)
	case c.IsSet("ctx") && limit > c.Int("ctx")-maxTokens:
		return fmt.Errorf("--prompt-limit %d plus --max-tokens %d is more than --ctx %d", limit, maxTokens, c.Int("ctx"))
	case !c.IsSet("ctx") && c.IsSet("prompt-limit") && trained > 0 && limit > trained-maxTokens:
		return fmt.Errorf("--prompt-limit %d plus --max-tokens %d is more than the %d tokens of context %s was trained with", limit, maxTokens, trained, path)
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
	var opts torch.ModelOptions
	if err := checkThreads("torch-threads", threads); err != nil {
		return nil, opts, err
	}
	prec, err := trainspec.ParsePrecision(c.String("dtype"))
	if err != nil {
		return nil, opts, fmt.Errorf("--dtype: %w", err)
	}
	rt, err := torch.Open(torch.Options{Plugin: c.String("torch-plugin"), Threads: threads})
	if err != nil {
		return nil, opts, err
	}
	dev, err := rt.ResolveDevice(c.String("train-device"))
	if err != nil {
		return nil, opts, fmt.Errorf("--train-device: %w", err)
	}
	opts.Device, opts.Precision, opts.GradCheckpoint = dev, prec, c.Bool("grad-checkpoint")
	return rt, opts, nil
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
	if n := c.Int("synthetic"); c.IsSet("synthetic") && n < 1 || n < 0 {
		return fmt.Errorf("--synthetic must be at least 1, got %d", n)
	}
	return nil
}

// syntheticSet is the built-in problems' difficulty from the flags.
func syntheticSet(c *ucli.Context) data.SyntheticConfig {
	cfg := data.SyntheticConfig{Terms: c.Int("synthetic-terms"), MaxOperand: c.Int("synthetic-max"), Ops: c.String("synthetic-ops")}
	if task := c.String("synthetic-task"); task != data.TaskArithmetic {
		cfg.Task = task // the default stays unrecorded, so earlier runs' configs still match
	}
	return cfg
}

type agentSpec struct {
	Name    string `json:"name"`
	Model   string `json:"model"`
	Adapter string `json:"adapter,omitempty"` // umad train: a PEFT adapter to start from, on Model
	// Hub is the Hugging Face id Model was resolved from, with its commit (ORG/NAME@COMMIT).
	Hub        string         `json:"hub,omitempty"`
	ChatFormat string         `json:"chat_format,omitempty"`
	Params     sampler.Params `json:"params"`
	MaxTokens  int            `json:"max_tokens"`
	// SeedOffset is added to each evaluation seed to give this agent's seed.
	SeedOffset uint64 `json:"seed_offset"`
}

// hubDir resolves an HF directory or hub id into a directory and the id with its commit
// ("" for a directory).
type hubDir func(arg string) (dir, id string, err error)

// hubDirs is hfDir as a hubDir.
func hubDirs(c *ucli.Context) hubDir {
	return func(arg string) (string, string, error) {
		dir, snap, err := hfDir(c, arg)
		if err != nil || snap == nil {
			return dir, "", err
		}
		return dir, snap.ID(), nil
	}
}

// parseAgent reads one --agent value, with def's sampling and response length unless it
// sets them. With agent=J, its path is a `umad train` run directory, and the agent is
// agent J of the run's newest checkpoint: its model.gguf when hub is nil (debates), else
// its HF directory; a path without agent= is then an HF directory or a hub id (hub).
func parseAgent(spec string, i int, def run.DebateAgent, hub hubDir) (agentSpec, error) {
	parts := strings.Split(spec, ",")
	a := agentSpec{Name: fmt.Sprintf("agent %d", i), Model: parts[0], MaxTokens: def.MaxTokens,
		SeedOffset: uint64(i) * 1000003, Params: def.Params}
	if a.Model == "" {
		return a, fmt.Errorf("--agent %q: no model path", spec)
	}
	seen := map[string]bool{}
	runAgent := 0
	for _, kv := range parts[1:] {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return a, fmt.Errorf("--agent %q: %q is not key=value", spec, kv)
		}
		known, err := a.set(k, v, &runAgent)
		if !known {
			return a, fmt.Errorf("--agent %q: unknown setting %q (name, seed, temperature, top-p, top-k, min-p, max-tokens, chat-format, adapter, agent)", spec, k)
		}
		// An empty adapter= named the working directory, and a repeated key took the last.
		switch {
		case v == "":
			return a, fmt.Errorf("--agent %q: %s is empty", spec, k)
		case seen[k]:
			return a, fmt.Errorf("--agent %q: %s is given twice", spec, k)
		case err != nil:
			return a, fmt.Errorf("--agent %q: %s: %w", spec, k, err)
		}
		seen[k] = true
	}
	if err := a.Params.Validate(); err != nil {
		return a, fmt.Errorf("--agent %q: %w", spec, err)
	}
	if a.MaxTokens < 1 {
		return a, fmt.Errorf("--agent %q: max tokens must be at least 1", spec)
	}
	if seen["agent"] {
		dir, err := trainedAgent(a.Model, runAgent)
		if err != nil {
			return a, fmt.Errorf("--agent %q: %w", spec, err)
		}
		if a.Model = dir; hub == nil {
			a.Model = filepath.Join(dir, "model.gguf")
		}
	} else if hub != nil { // an HF directory, or a hub id
		var err error
		if a.Model, a.Hub, err = hub(a.Model); err != nil {
			return a, fmt.Errorf("--agent %q: %w", spec, err)
		}
	}
	// Absolute, so the saved config still names the file when run from elsewhere.
	if abs, err := filepath.Abs(a.Model); err == nil {
		a.Model = abs
	}
	return a, nil
}

// set takes one key=value of an --agent spec (agent=I into runAgent); known is false for a
// key it does not know.
func (a *agentSpec) set(k, v string, runAgent *int) (known bool, err error) {
	switch k {
	case "name":
		a.Name = v
	case "chat-format":
		a.ChatFormat = v
	case "seed":
		a.SeedOffset, err = strconv.ParseUint(v, 10, 64)
	case "temperature":
		a.Params.Temperature, err = strconv.ParseFloat(v, 64)
	case "top-p":
		a.Params.TopP, err = strconv.ParseFloat(v, 64)
	case "min-p":
		a.Params.MinP, err = strconv.ParseFloat(v, 64)
	case "top-k":
		a.Params.TopK, err = strconv.Atoi(v)
	case "max-tokens":
		a.MaxTokens, err = strconv.Atoi(v)
	case "adapter":
		a.Adapter, err = filepath.Abs(v)
	case "agent":
		if *runAgent, err = strconv.Atoi(v); err == nil && *runAgent < 0 {
			err = errors.New("must not be negative")
		}
	default:
		return false, nil
	}
	return true, err
}

// trainedAgent is agent i's directory in the newest checkpoint of the training run.
func trainedAgent(run string, i int) (string, error) {
	ckpt, err := trainer.LatestCheckpoint(run)
	if err != nil {
		return "", err
	}
	if ckpt == "" {
		return "", fmt.Errorf("%s holds no checkpoint of a umad train run", run)
	}
	dir := trainer.AgentCheckpointDir(ckpt, i)
	if _, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("checkpoint %s has no agent %d", ckpt, i)
	}
	return dir, nil
}

// setFloat is a float flag's value when the user set it, else nil.
func setFloat(c *ucli.Context, name string) *float64 {
	if !c.IsSet(name) {
		return nil
	}
	v := c.Float64(name)
	return &v
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

// loraSettings reads the LoRA flags; rank 0 gives full fine-tuning, and then no other LoRA
// flag may be set, except --lora-dropout and --lora-bf16-base when fromAdapter: a run that
// starts from a PEFT adapter takes its rank, alpha and targets from it
// (run.TrainSettings.Resolve) but dropout and the base's type from the flags (the caller
// refuses them if no adapter comes).
func loraSettings(c *ucli.Context, fromAdapter bool) (trainspec.LoRA, error) {
	rank := c.Int("lora-rank")
	if rank == 0 {
		for _, f := range []string{"lora-alpha", "lora-targets", "lora-dropout", "lora-bf16-base"} {
			if c.IsSet(f) && !(fromAdapter && (f == "lora-dropout" || f == "lora-bf16-base")) {
				return trainspec.LoRA{}, fmt.Errorf("--%s needs --lora-rank (LoRA is off at rank 0)", f)
			}
		}
		l := trainspec.LoRA{Dropout: c.Float64("lora-dropout"), BaseBF16: c.Bool("lora-bf16-base")}
		if !(l.Dropout >= 0 && l.Dropout < 1) {
			return trainspec.LoRA{}, fmt.Errorf("--lora-dropout must be in [0, 1), got %v", l.Dropout)
		}
		return l, nil
	}
	if rank < 0 {
		return trainspec.LoRA{}, fmt.Errorf("--lora-rank must be at least 0 (0 = full fine-tuning), got %d", rank)
	}
	targets, err := trainspec.ParseLoRATargets(c.String("lora-targets"))
	if err != nil {
		return trainspec.LoRA{}, fmt.Errorf("--lora-targets: %w", err)
	}
	l := trainspec.LoRA{Rank: rank, Alpha: 2 * float64(rank), Targets: targets, Dropout: c.Float64("lora-dropout"), BaseBF16: c.Bool("lora-bf16-base")}
	if c.IsSet("lora-alpha") {
		l.Alpha = c.Float64("lora-alpha")
	}
	if err := l.Check(0); err != nil {
		return trainspec.LoRA{}, fmt.Errorf("--lora-*: %w", err)
	}
	return l, nil
}

// checkLoRARank refuses a rank above the hidden size of the model at path: such an adapter
// costs more than full fine-tuning.
func checkLoRARank(l trainspec.LoRA, hidden int, path string) error {
	if err := l.Check(hidden); err != nil {
		return fmt.Errorf("--lora-rank with %s: %w", path, err)
	}
	return nil
}
