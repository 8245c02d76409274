package run

// umad debate as a typed run: its settings (DebateSettings, saved as config.json), how this
// process runs them (Debate), and the first steps, Resolve and Check. Plan and Open are
// debateopen.go's, the run itself debaterun.go's.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/launch"
	"github.com/umad-dev/umad/recipe"
	"github.com/umad-dev/umad/sampler"
	"github.com/umad-dev/umad/uncertainty"
)

// DebateAgent is one agent of a debate run: a GGUF model and its sampling settings.
type DebateAgent struct {
	Name       string         `json:"name"`
	Model      string         `json:"model"` // absolute, so the saved config names it from anywhere
	ChatFormat string         `json:"chat_format,omitempty"`
	Params     sampler.Params `json:"params"`
	MaxTokens  int            `json:"max_tokens"`
	// SeedOffset is added to each evaluation seed to give this agent's seed.
	SeedOffset uint64 `json:"seed_offset"`
}

// DebateSettings are what a debate run does, saved as its config.json, so that a run is
// reproduced and resumed only with the same settings. Errors name a setting by its flag
// (--turns), which is also its key in an experiment file's flags table (turns).
type DebateSettings struct {
	Agents    []DebateAgent `json:"agents"`
	Data      string        `json:"data"` // a problem set file or folder, absolute; "" for the built-in set
	Synthetic int           `json:"synthetic,omitempty"`
	// SyntheticSet is the difficulty of the built-in problems, when Data is empty.
	SyntheticSet  *data.SyntheticConfig `json:"synthetic_set,omitempty"`
	SyntheticSeed uint64                `json:"synthetic_seed,omitempty"`
	Limit         int                   `json:"limit,omitempty"`
	SampleRatio   float64               `json:"sample_ratio,omitempty"`
	K             int                   `json:"k"`
	Protocol      string                `json:"protocol"`           // debate.Protocol; "" is the default, trajectories
	Continue      string                `json:"continue,omitempty"` // probe's continuations: sample (the default) or greedy
	Turns         int                   `json:"turns"`
	Seeds         []uint64              `json:"seeds"`
	PromptLimit   int                   `json:"prompt_limit"`
	Mask          bool                  `json:"mask"`
	FullHistory   bool                  `json:"full_history"`
	Anonymise     bool                  `json:"anonymise"`
	StopAgree     int                   `json:"stop_agree,omitempty"`
	StopEU        float64               `json:"stop_eu,omitempty"`
	KVType        string                `json:"kv_type"`
	FlashAttn     string                `json:"flash_attn"`
	// Ctx is the tokens per sequence; Resolve sizes it for the longest prompt plus the
	// longest response unless Debate.CtxGiven.
	Ctx           int  `json:"ctx"`
	Deterministic bool `json:"deterministic,omitempty"`
	// Verifier and VerifierPrompt are the verifier model and its template, absolute.
	Verifier       string          `json:"verifier,omitempty"`
	VerifierPrompt string          `json:"verifier_prompt,omitempty"`
	VerifierBudget time.Duration   `json:"verifier_budget,omitempty"`
	Recipe         *recipe.Applied `json:"recipe,omitempty"`
}

// DefaultDebateSettings are a debate's settings unless given, agents aside: what the
// flags show and what a debate (of the command or of an experiment's cell) starts from.
func DefaultDebateSettings() DebateSettings {
	set := data.DefaultSynthetic
	return DebateSettings{Synthetic: 20, SyntheticSet: &set, SyntheticSeed: 1, K: 4, Protocol: string(debate.Trajectories),
		Turns: 3, Seeds: []uint64{1}, PromptLimit: DefaultPromptLimit, Mask: true, KVType: DefaultKVType, FlashAttn: DefaultFlashAttn, Ctx: DefaultCtx}
}

// DefaultDebate is a debate with DefaultDebateSettings, run in one process.
func DefaultDebate() Debate {
	return Debate{Settings: DefaultDebateSettings(), Slots: DefaultSlots, NProc: 1, DistTimeout: DefaultDistTimeout}
}

// The defaults a debate shares with a training run (the flags of both show them).
const (
	DefaultPromptLimit = 5120
	DefaultKVType      = "f16"
	DefaultFlashAttn   = "auto"
	DefaultCtx         = 4096
	DefaultSlots       = 16
	DefaultDistTimeout = 10 * time.Minute
	// DefaultContinue is the probe protocol's continuation unless given (Resolve).
	DefaultContinue = "sample"
)

// DefaultAgent is an agent's sampling unless given: the paper's inference settings.
var DefaultAgent = DebateAgent{Params: sampler.Params{Temperature: 0.6, TopP: 0.95}, MaxTokens: 2048}

// UnmarshalJSON reads a config.json; one written before --protocol existed is a run of
// the trajectories protocol (so it resumes).
func (s *DebateSettings) UnmarshalJSON(b []byte) error {
	type plain DebateSettings
	p := plain{Protocol: string(debate.Trajectories)}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = DebateSettings(p)
	return nil
}

// Debate is one `umad debate` run: its settings, and how this process runs them, which a
// resume may change.
type Debate struct {
	Settings DebateSettings
	// Out is the run directory.
	Out string
	// CtxGiven says Settings.Ctx was given (--ctx) rather than sized by Resolve, and
	// PromptLimitGiven that Settings.PromptLimit was given rather than left at its default:
	// what a prompt plus response longer than a model's trained context is held to.
	CtxGiven, PromptLimitGiven bool
	// Threads are llama.cpp's threads per engine; 0 gives each engine its share of the
	// physical cores.
	Threads   int
	Slots     int // parallel sequences per model
	Placement engine.Placement
	// NProc processes on this machine each debate a share of the problems; DistTimeout
	// bounds how long a rank may run on after another finished its share.
	NProc       int
	DistTimeout time.Duration
	// Command is the flags that made the run, recorded in config.json as "command" for
	// --config (nil: none recorded). RankCommand is the command line (after "umad") the
	// ranks of a multi-process run run; nil is this process's own.
	Command     map[string]any
	RankCommand []string
	// Note is printed to Stderr first by the process that starts the run (not by its
	// ranks): what --recipe set.
	Note string
	// Stdout gets the run's results (where its report is), Stderr its notes; the progress
	// line goes to the process's stderr.
	Stdout, Stderr io.Writer
}

// Resolve fills the settings' defaults: the protocol's, and a context sized for the
// longest prompt plus the longest response unless CtxGiven.
func (d *Debate) Resolve() {
	s := &d.Settings
	if s.Protocol == "" {
		s.Protocol = string(debate.Trajectories)
	}
	if debate.Protocol(s.Protocol) == debate.Probe && s.Continue == "" {
		s.Continue = DefaultContinue
	}
	if !d.CtxGiven {
		s.Ctx = s.PromptLimit
		for _, a := range s.Agents {
			s.Ctx = max(s.Ctx, s.PromptLimit+a.MaxTokens)
		}
	}
}

// Check refuses settings that cannot run, naming them, before anything loads.
func (d *Debate) Check() error {
	s := d.Settings
	switch {
	case len(s.Agents) == 0:
		return errors.New("a debate needs an agent (--agent)")
	case s.Data == "" && (s.Limit != 0 || s.SampleRatio != 0):
		return errors.New("--limit and --sample-ratio choose among the problems of --data; the built-in set's size is --synthetic N")
	case s.Data == "" && s.Synthetic < 1:
		return fmt.Errorf("--synthetic must be at least 1, got %d", s.Synthetic)
	case s.K < 1:
		return fmt.Errorf("-k must be at least 1, got %d", s.K)
	case s.Turns < 1:
		return fmt.Errorf("--turns must be at least 1, got %d", s.Turns)
	case s.PromptLimit < 1:
		return fmt.Errorf("--prompt-limit must be positive")
	case len(s.Seeds) == 0:
		return errors.New("--seeds names no seed")
	case s.StopAgree < 0 || s.StopEU < 0:
		return errors.New("--stop: thresholds must not be negative")
	case d.CtxGiven && s.Ctx < 2:
		return fmt.Errorf("--ctx must be at least 2, got %d", s.Ctx)
	case s.VerifierBudget < 0:
		return fmt.Errorf("--verifier-budget must not be negative, got %v", s.VerifierBudget)
	}
	if err := d.checkProtocol(); err != nil {
		return err
	}
	for i, seed := range s.Seeds {
		if slices.Contains(s.Seeds[:i], seed) {
			return fmt.Errorf("--seeds: seed %d given twice", seed)
		}
	}
	_, err := d.engineOptions()
	return err
}

// checkProtocol checks --protocol and --continue against -k.
func (d *Debate) checkProtocol() error {
	s := d.Settings
	switch debate.Protocol(s.Protocol) {
	case debate.Trajectories:
		if s.Continue != "" {
			return errors.New("--continue chooses the probe protocol's continuations; add --protocol probe")
		}
	case debate.Probe:
		if s.K < 2 {
			return fmt.Errorf("--protocol probe estimates each turn's answer distributions from K samples per agent; -k must be at least 2, got %d", s.K)
		}
		if s.Continue != "sample" && s.Continue != "greedy" {
			return fmt.Errorf("--continue %q: want sample or greedy", s.Continue)
		}
	default:
		return fmt.Errorf("--protocol %q: want one of %v", s.Protocol, debate.Protocols)
	}
	return nil
}

// engineOptions are the agents' engines' llama.cpp settings, before the threads are shared.
func (d *Debate) engineOptions() (engine.Options, error) {
	s := d.Settings
	return EngineOptions(d.Slots, s.Ctx, d.Threads, s.KVType, s.FlashAttn)
}

// ParseDebateSeeds reads a comma-separated list of evaluation seeds (--seeds 1,2,3).
func ParseDebateSeeds(list string) ([]uint64, error) {
	var seeds []uint64
	for _, s := range strings.Split(list, ",") {
		v, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("--seeds %q: %w", list, err)
		}
		seeds = append(seeds, v)
	}
	return seeds, nil
}

// ParseDebateStop reads adaptive-stopping rules (--stop agree=R, --stop eu=X) into the
// settings.
func ParseDebateStop(rules []string, s *DebateSettings) error {
	for _, rule := range rules {
		k, v, _ := strings.Cut(rule, "=")
		var err error
		switch k {
		case "agree":
			s.StopAgree, err = strconv.Atoi(v)
			if err == nil && s.StopAgree < 1 {
				err = errors.New("want at least 1")
			}
		case "eu":
			s.StopEU, err = strconv.ParseFloat(v, 64)
			if err == nil && !(s.StopEU > 0 && !math.IsInf(s.StopEU, 1)) {
				err = errors.New("want a finite positive threshold")
			}
		default:
			err = errors.New("want agree=R or eu=X")
		}
		if err != nil {
			return fmt.Errorf("--stop %q: %w", rule, err)
		}
	}
	return nil
}

// ProtocolText names the run's protocol in its report.
func (s DebateSettings) ProtocolText() string {
	if debate.Protocol(s.Protocol) == debate.Probe {
		how := "sampled"
		if s.Continue == "greedy" {
			how = "greedy"
		}
		return fmt.Sprintf("probe (the paper's Algorithm 1): at each turn, K = %d samples per agent from one context give the "+
			"answer distributions; one %s continuation per agent forms the next turn's context. Flips pair samples by index "+
			"across turns, which here are independent draws, not one trajectory", s.K, how)
	}
	return fmt.Sprintf("trajectories (the UMAD reference's): K = %d debates per problem, sample k of every turn continuing trajectory k", s.K)
}

// Problems loads the problems: Data's, or the built-in set.
func (s DebateSettings) Problems() ([]data.Problem, error) {
	if s.Data == "" {
		return data.SyntheticWith(s.Synthetic, s.SyntheticSeed, *s.SyntheticSet)
	}
	ps, err := data.Load(s.Data, data.Options{Limit: s.Limit, SampleRatio: s.SampleRatio, Seed: 1})
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s: no valid problems", s.Data)
	}
	return ps, nil
}

// config is the debate of every seed on agents (evalrun.Run sets the seeds).
func (s DebateSettings) config(agents []debate.Agent) debate.Config {
	cfg := debate.Config{Agents: agents, Turns: s.Turns, K: s.K, PromptLimit: s.PromptLimit,
		Protocol: debate.Protocol(s.Protocol), GreedyContinuation: s.Continue == "greedy",
		StopAgree: s.StopAgree, StopEU: s.StopEU, EU: uncertainty.TurnEU, Deterministic: s.Deterministic,
		Prompt: debate.Prompt{KeepAnswers: !s.Mask, Anonymise: s.Anonymise}}
	if s.FullHistory {
		cfg.Prompt.History = debate.HistoryFull
	}
	return cfg
}

// place is this process's place in the run: launch.Resolve's, for a run without a
// process group. isRank says a launcher started it to debate a share.
func (d *Debate) place() (p launch.Spec, isRank bool, err error) {
	if v := launch.JobRank(); v != "" && !launch.OwnRank() {
		return p, false, fmt.Errorf("%s is set (by torchrun, srun or a job system?), but umad debate starts its own ranks with --nproc N and merges their shares into one report; run it once per job (srun -n 1), without RANK", v)
	}
	p, isRank, err = launch.Resolve(launch.Options{NProc: d.NProc, Timeout: d.DistTimeout})
	p.Command = d.RankCommand
	return p, isRank, err
}
