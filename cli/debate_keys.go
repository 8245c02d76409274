package cli

// A debate's typed value before it resolves (debateRequest), and its settings by key
// (debateKeys), which `umad debate`'s flags and an experiment's debate cells both set.

import (
	"fmt"
	"strings"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/run"
)

// debateRequest is a debate as its flags or an experiment cell give it, typed: umad's
// defaults (newDebateRequest), then the settings given, key by key (debateKeys). resolve
// makes it a run.Debate.
type debateRequest struct {
	run.Debate
	Recipe string
	// Agents are the --agent specs, each with Agent's sampling unless it sets its own.
	Agents []string
	Agent  run.DebateAgent
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

// newDebateRequest is a debate with umad's defaults (run.DefaultDebate) and nothing given.
func newDebateRequest() *debateRequest {
	d := run.DefaultDebate()
	return &debateRequest{Debate: d, Agent: run.DefaultAgent, Seeds: seedsText(d.Settings.Seeds), Synthetic: *d.Settings.SyntheticSet,
		Task: data.TaskArithmetic, given: map[string]bool{}}
}

// dr is debateRequest, short for the table below.
type dr = debateRequest

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

// seedsText writes seeds as --seeds takes them: 1,2,3.
func seedsText(seeds []uint64) string {
	var b strings.Builder
	for i, s := range seeds {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprint(&b, s)
	}
	return b.String()
}
