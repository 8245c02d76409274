package run

// umad train as a typed run: its settings (TrainSettings, saved as config.json), how this
// process runs them (Train), and Load and Check. Resolving the settings is
// train_resolve.go's, the memory plan train_plan.go's, the run directory train_dir.go's,
// the run itself train_run.go's.

import (
	"fmt"
	"io"
	"runtime"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/tokenizer"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainspec"
)

// TrainAgent is one trained agent: an HF directory (or a PEFT adapter on one) and its
// sampling settings.
type TrainAgent struct {
	Name    string `json:"name"`
	Model   string `json:"model"`
	Adapter string `json:"adapter,omitempty"` // a PEFT adapter to start from, on Model
	// Hub is the Hugging Face id Model was resolved from, with its commit (ORG/NAME@COMMIT).
	Hub        string         `json:"hub,omitempty"`
	ChatFormat string         `json:"chat_format,omitempty"`
	Params     sampler.Params `json:"params"`
	MaxTokens  int            `json:"max_tokens"`
	SeedOffset uint64         `json:"seed_offset"`
}

// TrainSettings are what a training run does, saved as its config.json; a resume must
// match them (Steps may grow, train_dir.go). Errors name a setting by its flag (--lr),
// which is also its key in an experiment file's flags table (lr).
type TrainSettings struct {
	Agents      []TrainAgent         `json:"agents"`
	Data        string               `json:"data,omitempty"` // a problem file or folder, absolute; "" for the built-in set
	Synthetic   int                  `json:"synthetic,omitempty"`
	SynthConfig data.SyntheticConfig `json:"synthetic_config"`
	SynthSeed   uint64               `json:"synthetic_seed"`
	// The validation problems: ValData's (at most ValLimit), else ValProblems of the
	// built-in set.
	ValProblems int              `json:"val_problems"`
	ValData     string           `json:"val_data,omitempty"`
	ValLimit    int              `json:"val_limit,omitempty"`
	Trainer     trainer.Settings `json:"trainer"`
	KVType      string           `json:"kv_type"`
	FlashAttn   string           `json:"flash_attn"`
	// VerifierPrompt is the verifier's prompt template file, absolute.
	VerifierPrompt string          `json:"verifier_prompt,omitempty"`
	Deterministic  bool            `json:"deterministic,omitempty"`
	Recipe         *recipe.Applied `json:"recipe,omitempty"`
}

// valSeed keeps the validation problems apart from the training ones.
const valSeed = 1_000_003

// Train is one `umad train` run: its settings, and how this process runs them, which a
// resume may change.
type Train struct {
	Settings TrainSettings
	// Epochs sets the steps when Settings.Trainer.Steps is 0: passes over the problems.
	Epochs int
	Out    string // the run directory
	// Resume continues the run Out holds; without it Out must hold none.
	Resume bool
	// DryRun prints the memory plan and checks the settings and Out, then stops before
	// anything loads or is written.
	DryRun bool
	// Placement is where the training state lives; its device is one the plugin the run
	// trains with can use.
	Placement trainspec.Placement
	// Rollout is the engines' options and placement; its Deterministic is the settings'.
	Rollout trainer.Rollout
	// TorchThreads are libtorch's threads (0: every CPU). ThreadsGiven and
	// TorchThreadsGiven say the engines' and libtorch's threads were given (--threads,
	// --torch-threads) rather than left to ShareCores.
	TorchThreads                    int
	ThreadsGiven, TorchThreadsGiven bool
	// CtxGiven says Rollout.Engine.SeqContext was given (--ctx) rather than sized for the
	// prompt limit plus the response, and PromptLimitGiven that the prompt limit was
	// given: what a sequence longer than a model's trained context is held to.
	CtxGiven, PromptLimitGiven bool
	// MemoryBudget is the host memory the run may use (0: MemAvailable); NoMemoryCheck
	// starts a run whose plan does not fit.
	MemoryBudget  int64
	NoMemoryCheck bool
	// Command is the flags that made the run, recorded in config.json as "command" for
	// --config (nil: none recorded).
	Command map[string]any
	// Stdout gets the run's results (and a dry run's plan), Stderr its notes and plan.
	Stdout, Stderr io.Writer
	data           trainer.Data // Load's
}

// Load reads the training and validation problems and, without steps, sets them from
// Epochs (in the settings too).
func (t *Train) Load() error {
	s := &t.Settings
	var err error
	if s.Data != "" {
		if t.data.Problems, err = data.Load(s.Data, data.Options{}); err != nil {
			return err // also when no problem is usable
		}
	} else if t.data.Problems, err = data.SyntheticWith(s.Synthetic, s.SynthSeed, s.SynthConfig); err != nil {
		return err
	}
	if t.data.ValProblems, err = s.valProblems(); err != nil {
		return err
	}
	if s.Trainer.Steps == 0 {
		batch := s.Trainer.BatchSize
		if batch < 1 || len(t.data.Problems) < batch {
			return fmt.Errorf("%d problems are fewer than one batch of %d", len(t.data.Problems), batch)
		}
		s.Trainer.Steps = t.Epochs * (len(t.data.Problems) / batch)
	}
	return nil
}

// ShareCores gives each rank of d's machine its share of the cores, for the rollout
// engines (which decode concurrently) and libtorch, and an overlapped run's engines and
// libtorch half the cores each, as the two phases run at the same time; threads that were
// given stay.
func (t *Train) ShareCores(d launch.Spec) {
	engines := len(t.Settings.Agents)
	threads, torchThreads := t.ThreadsGiven, t.TorchThreadsGiven
	if d.LocalWorld > 1 {
		if !torchThreads {
			t.TorchThreads, torchThreads = max(1, runtime.NumCPU()/d.LocalWorld), true
		}
		if !threads {
			t.Rollout.Engine.Threads, threads = engine.SharedThreads(engines*d.LocalWorld), true
		}
	}
	if t.Settings.Trainer.Overlap == 1 && !threads && !torchThreads {
		t.TorchThreads, t.Rollout.Engine.Threads = max(1, runtime.NumCPU()/2), engine.SharedThreads(2*engines)
	}
}

// valProblems are the held-out validation problems.
func (s TrainSettings) valProblems() ([]data.Problem, error) {
	if s.ValData == "" {
		return data.SyntheticWith(s.ValProblems, s.SynthSeed+valSeed, s.SynthConfig)
	}
	ps, err := data.Load(s.ValData, data.Options{Limit: s.ValLimit})
	if err != nil {
		return nil, fmt.Errorf("--val-data: %w", err) // also when no problem is usable
	}
	return ps, nil
}

// Config is the trainer's configuration of the loaded run.
func (t *Train) Config() trainer.Config {
	r := t.Rollout
	r.Deterministic = t.Settings.Deterministic
	return trainer.Config{Settings: t.Settings.Trainer, Data: t.data, Rollout: r, Placement: t.Placement, Out: t.Out}
}

// Check refuses what the run cannot do before anything loads: the trainer's settings, an
// agent's lengths against the context its model was trained with, and a prompt limit
// below any prompt (with the tokenizers alone). It sizes the engines' context and threads
// when they were left to it. Load comes first, Plan next.
func (t *Train) Check() error {
	cfg := t.Config()
	if err := cfg.Check(); err != nil {
		return err
	}
	for _, a := range t.Settings.Agents {
		hc, err := model.LoadHFConfig(a.Model)
		if err != nil {
			continue // the trainer says what is wrong with the directory
		}
		if err := t.checkLengths(a.MaxTokens, hc.MaxPositionEmbeddings, a.Model); err != nil {
			return err
		}
	}
	e := &t.Rollout.Engine
	if !t.CtxGiven {
		e.SeqContext = 0 // room for the prompt limit plus the response
	}
	if e.Threads == 0 {
		// Every agent has its own engine and they decode concurrently: share the cores.
		e.Threads = engine.SharedThreads(len(t.Settings.Agents))
	}
	cfg = t.Config()
	return cfg.CheckPromptFloor()
}

// checkTokenizers refuses what the first sync's GGUF conversion would refuse (an empty
// vocabulary, a pre-tokenizer llama.cpp lacks), before anything loads.
func (t *Train) checkTokenizers() error {
	for _, a := range t.Settings.Agents {
		if _, err := tokenizer.LoadHF(a.Model); err != nil {
			return err
		}
	}
	return nil
}

// checkLengths checks what a sequence of an agent holds against the model at path, trained
// with a context of trained tokens: its response (maxTokens) must fit that context, and the
// prompt limit plus the response must fit --ctx when it is given, else, when the prompt
// limit is given, the trained context (each slot's KV cache has room for both: a limit of
// a million tokens allocated gigabytes before llama.cpp failed). The default limit is not
// held to a short trained context: a sequence may run past it, as with llama.cpp.
func (t *Train) checkLengths(maxTokens, trained int, path string) error {
	if err := beyondContext("--max-tokens", maxTokens, trained, path); err != nil {
		return err
	}
	limit, ctx := t.Settings.Trainer.PromptLimit, t.Rollout.Engine.SeqContext
	switch {
	case limit < 1:
		return fmt.Errorf("--prompt-limit must be at least 1, got %d", limit)
	case t.CtxGiven && limit > ctx-maxTokens:
		return fmt.Errorf("--prompt-limit %d plus --max-tokens %d is more than --ctx %d", limit, maxTokens, ctx)
	case !t.CtxGiven && t.PromptLimitGiven && trained > 0 && limit > trained-maxTokens:
		return fmt.Errorf("--prompt-limit %d plus --max-tokens %d is more than the %d tokens of context %s was trained with", limit, maxTokens, trained, path)
	}
	if t.CtxGiven {
		return beyondContext("--ctx", ctx, trained, path)
	}
	return nil
}

// beyondContext refuses n tokens (of setting) beyond the trained context of the model at
// path; an unknown context (0) passes.
func beyondContext(setting string, n, trained int, path string) error {
	if trained > 0 && n > trained {
		return fmt.Errorf("%s %d is more than the %d tokens of context %s was trained with", setting, n, trained, path)
	}
	return nil
}
