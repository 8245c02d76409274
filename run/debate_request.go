package run

// A debate's request: its typed value before it resolves (DebateRequest), and its
// settings by key (debateKeys), which `umad debate`'s flags and an experiment's debate
// cells both set.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/umad-dev/umad/data"
)

// DebateRequest is a debate as its flags or an experiment cell give it, typed: umad's
// defaults (NewDebateRequest), then the settings given, key by key (Keys). Resolve makes
// it a Debate.
type DebateRequest struct {
	Debate
	Recipe string
	// Agents are the --agent specs, each with Agent's sampling unless it sets its own.
	Agents []string
	Agent  DebateAgent
	// Seeds is the --seeds list; Seed, when given, is the one seed instead.
	Seeds     string
	Seed      uint64
	Stop      []string
	GPULayers int
	Devices   string
	// Verifier and VerifierPrompt are the verifier model and its template as given.
	Verifier, VerifierPrompt string
	// Synthetic is the built-in problems' difficulty, used without --data, and Task its
	// task as given.
	Synthetic data.SyntheticConfig
	Task      string
	// given names the settings given (or set by the recipe), by key.
	given map[string]bool
}

// NewDebateRequest is a debate with umad's defaults (DefaultDebate) and nothing given.
func NewDebateRequest() *DebateRequest {
	d := DefaultDebate()
	return &DebateRequest{Debate: d, Agent: DefaultAgent, Seeds: SeedsText(d.Settings.Seeds), Seed: d.Settings.Seeds[0], Synthetic: *d.Settings.SyntheticSet,
		Task: data.TaskArithmetic, given: map[string]bool{}}
}

// dr is DebateRequest, short for the table below.
type dr = DebateRequest

// debateKeys are a debate's settings by key: umad debate's flags by name.
var debateKeys = keys[dr]{
	"agent":           listKey(func(r *dr) *[]string { return &r.Agents }),
	"recipe":          textKey(func(r *dr) *string { return &r.Recipe }),
	"data":            textKey(func(r *dr) *string { return &r.Settings.Data }),
	"synthetic":       intKey(func(r *dr) *int { return &r.Settings.Synthetic }),
	"limit":           intKey(func(r *dr) *int { return &r.Settings.Limit }),
	"sample-ratio":    floatKey(func(r *dr) *float64 { return &r.Settings.SampleRatio }),
	"k":               intKey(func(r *dr) *int { return &r.Settings.K }),
	"protocol":        textKey(func(r *dr) *string { return &r.Settings.Protocol }),
	"continue":        textKey(func(r *dr) *string { return &r.Settings.Continue }),
	"turns":           intKey(func(r *dr) *int { return &r.Settings.Turns }),
	"seeds":           textKey(func(r *dr) *string { return &r.Seeds }),
	"seed":            uintKey(func(r *dr) *uint64 { return &r.Seed }),
	"prompt-limit":    intKey(func(r *dr) *int { return &r.Settings.PromptLimit }),
	"stop":            listKey(func(r *dr) *[]string { return &r.Stop }),
	"slots":           intKey(func(r *dr) *int { return &r.Slots }),
	"out":             textKey(func(r *dr) *string { return &r.Out }),
	"nproc":           intKey(func(r *dr) *int { return &r.NProc }),
	"dist-timeout":    durationKey(func(r *dr) *time.Duration { return &r.DistTimeout }),
	"deterministic":   boolKey(func(r *dr) *bool { return &r.Settings.Deterministic }),
	"temperature":     floatKey(func(r *dr) *float64 { return &r.Agent.Params.Temperature }),
	"top-p":           floatKey(func(r *dr) *float64 { return &r.Agent.Params.TopP }),
	"top-k":           intKey(func(r *dr) *int { return &r.Agent.Params.TopK }),
	"min-p":           floatKey(func(r *dr) *float64 { return &r.Agent.Params.MinP }),
	"max-tokens":      intKey(func(r *dr) *int { return &r.Agent.MaxTokens }),
	"threads":         intKey(func(r *dr) *int { return &r.Threads }),
	"gpu-layers":      intKey(func(r *dr) *int { return &r.GPULayers }),
	"devices":         textKey(func(r *dr) *string { return &r.Devices }),
	"kv-type":         textKey(func(r *dr) *string { return &r.Settings.KVType }),
	"flash-attn":      textKey(func(r *dr) *string { return &r.Settings.FlashAttn }),
	"ctx":             intKey(func(r *dr) *int { return &r.Settings.Ctx }),
	"synthetic-terms": intKey(func(r *dr) *int { return &r.Synthetic.Terms }),
	"synthetic-max":   intKey(func(r *dr) *int { return &r.Synthetic.MaxOperand }),
	"synthetic-ops":   textKey(func(r *dr) *string { return &r.Synthetic.Ops }),
	"synthetic-seed":  uintKey(func(r *dr) *uint64 { return &r.Settings.SyntheticSeed }),
	"synthetic-task":  textKey(func(r *dr) *string { return &r.Task }),
	"verifier":        textKey(func(r *dr) *string { return &r.Verifier }),
	"verifier-prompt": textKey(func(r *dr) *string { return &r.VerifierPrompt }),
	"verifier-budget": durationKey(func(r *dr) *time.Duration { return &r.Settings.VerifierBudget }),
	"no-mask":         notKey(func(r *dr) *bool { return &r.Settings.Mask }),
	"full-history":    boolKey(func(r *dr) *bool { return &r.Settings.FullHistory }),
	"anonymise":       boolKey(func(r *dr) *bool { return &r.Settings.Anonymise }),
}

// Keys are the request's settings by key, to set it by.
func (r *DebateRequest) Keys() Keys { return typed[dr]{keys: debateKeys, value: r, given: r.given} }

// Resolve is the run the request describes: --recipe's values for the settings not
// given, then every setting, resolved and checked.
func (r *DebateRequest) Resolve() (Debate, error) {
	k := r.Keys()
	rec, err := applyRecipe(k, "debate", "")
	if err != nil {
		return Debate{}, err
	}
	d := r.Debate
	s := &d.Settings
	s.Recipe = rec
	if err := r.problems(s); err != nil {
		return d, err
	}
	if s.Agents, err = r.agents(); err != nil {
		return d, err
	}
	if s.Seeds, err = r.seeds(); err != nil {
		return d, err
	}
	if err := ParseDebateStop(r.Stop, s); err != nil {
		return d, err
	}
	d.CtxGiven, d.PromptLimitGiven = r.given["ctx"], r.given["prompt-limit"]
	var note strings.Builder
	WriteRecipe(&note, rec, k, false)
	d.Note = note.String()
	if err := CheckThreads("threads", d.Threads); err != nil {
		return d, err
	}
	if d.Placement, err = PlaceEngines(r.GPULayers, r.given["gpu-layers"], r.Devices); err != nil {
		return d, err
	}
	d.Resolve()
	return d, d.Check()
}

// problems sets the problems' source: --data's file, or the built-in set; and
// --verifier's model and template, made absolute.
func (r *DebateRequest) problems(s *DebateSettings) error {
	if s.Data == "" {
		set := r.Synthetic
		if r.Task != data.TaskArithmetic {
			set.Task = r.Task // the default stays unrecorded, so earlier runs' configs still match
		}
		s.SyntheticSet = &set
	} else {
		s.Synthetic, s.SyntheticSet, s.SyntheticSeed = 0, nil, 0 // the built-in set's, unrecorded
		if abs, err := filepath.Abs(s.Data); err == nil {
			s.Data = abs
		}
	}
	if err := CheckVerifier(r.Verifier, r.VerifierPrompt, s.VerifierBudget, r.given["verifier-budget"] || r.given["verifier-prompt"]); err != nil {
		return err
	}
	if r.Verifier == "" {
		s.VerifierBudget = 0
		return nil
	}
	var err error
	if s.Verifier, err = filepath.Abs(r.Verifier); err != nil {
		return err
	}
	s.VerifierPrompt, err = filepath.Abs(r.VerifierPrompt)
	return err
}

// agents reads --agent: GGUF models, or agents of a training run's checkpoint.
func (r *DebateRequest) agents() ([]DebateAgent, error) {
	var agents []DebateAgent
	for i, spec := range r.Agents {
		a, err := parseAgent(spec, i, r.Agent, nil)
		if err != nil {
			return nil, err
		}
		if a.Adapter != "" {
			return nil, fmt.Errorf("--agent %q: adapter= is for umad train; debate a merged model (umad convert lora2hf, then hf2gguf)", spec)
		}
		agents = append(agents, DebateAgent{Name: a.Name, Model: a.Model, ChatFormat: a.ChatFormat, Params: a.Params,
			MaxTokens: a.MaxTokens, SeedOffset: a.SeedOffset})
	}
	return agents, nil
}

// seeds reads --seeds, or --seed as one seed.
func (r *DebateRequest) seeds() ([]uint64, error) {
	if !r.given["seed"] {
		return ParseDebateSeeds(r.Seeds)
	}
	if r.given["seeds"] {
		return nil, errors.New("give --seed or --seeds, not both")
	}
	return []uint64{r.Seed}, nil
}

// SeedsText writes seeds as --seeds takes them: 1,2,3.
func SeedsText(seeds []uint64) string {
	var b strings.Builder
	for i, s := range seeds {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, s)
	}
	return b.String()
}
