package run

// A debate run's Plan (its problems, checked against the prompt limit) and what Open
// loads: each distinct model once, as a server with its own engine, and the verifier.

import (
	"errors"
	"fmt"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/verifier"
)

// DebatePlan is what a debate run will debate.
type DebatePlan struct {
	Problems []data.Problem
}

// Plan loads the problems and refuses a prompt limit that a turn-1 prompt cannot fit
// even with every response emptied (debate.CheckPromptFloor), with each model's tokenizer
// alone, before anything loads: the debate failed at turn 1.
func (d *Debate) Plan() (DebatePlan, error) {
	ps, err := d.Settings.Problems()
	if err != nil {
		return DebatePlan{}, err
	}
	return DebatePlan{Problems: ps}, d.checkPromptFloor(ps)
}

func (d *Debate) checkPromptFloor(problems []data.Problem) error {
	s := d.Settings
	if s.Turns < 2 {
		return nil
	}
	agents := make([]debate.FloorAgent, len(s.Agents))
	for i, a := range s.Agents {
		m, err := engine.OpenVocab(a.Model)
		if err != nil {
			return err
		}
		defer m.Close()
		if agents[i].Format, err = m.Format(a.ChatFormat); err != nil {
			return err
		}
		agents[i].Model = m
	}
	return debate.CheckPromptFloor(agents, problems, s.config(nil).Prompt, s.PromptLimit)
}

// debateModels are a debating process's loaded models: a server per distinct model, the
// agents on them, and the verifier (nil without one).
type debateModels struct {
	servers map[string]*engine.Server
	agents  []debate.Agent
	check   *verifier.Session
}

// close frees the models.
func (m *debateModels) close() {
	for _, srv := range m.servers {
		srv.Close()
	}
	m.check.Close()
}

// distinctModels counts the agents' distinct models: the engines that decode at once.
func (s DebateSettings) distinctModels() int {
	distinct := map[string]bool{}
	for _, a := range s.Agents {
		distinct[a.Model] = true
	}
	return len(distinct)
}

// openModels loads each distinct model once, with threads llama.cpp threads per engine
// (0: each its share of the cores), and the verifier. Context lengths are checked against
// the models before an engine allocates its KV cache.
func (d *Debate) openModels(threads int) (*debateModels, error) {
	s := d.Settings
	m := &debateModels{servers: map[string]*engine.Server{}}
	fail := func(err error) (*debateModels, error) {
		m.close()
		return nil, err
	}
	opt, err := d.engineOptions()
	if err != nil {
		return nil, err
	}
	if opt.Threads = threads; threads == 0 && s.distinctModels() > 1 {
		opt.Threads = engine.SharedThreads(s.distinctModels()) // the engines decode concurrently
	}
	for _, a := range s.Agents {
		srv := m.servers[a.Model]
		if srv == nil {
			if srv, err = d.openServer(a.Model, opt); err != nil {
				return fail(err)
			}
			m.servers[a.Model] = srv
		}
		f, err := srv.Format(a.ChatFormat)
		if err != nil {
			return fail(err)
		}
		m.agents = append(m.agents, debate.Agent{Name: a.Name, Generator: srv.Engine, Format: f, Params: a.Params, MaxTokens: a.MaxTokens})
	}
	if m.check, err = d.openVerifier(threads); err != nil {
		return fail(err)
	}
	return m, nil
}

// openServer loads the model at path with an engine for its agents, once their lengths
// fit what it was trained with.
func (d *Debate) openServer(path string, opt engine.Options) (*engine.Server, error) {
	m, err := engine.OpenModel(path, d.Placement)
	if err != nil {
		return nil, err
	}
	srv := &engine.Server{Model: m}
	for _, a := range d.Settings.Agents {
		if a.Model == path {
			if err := d.checkLengths(a.MaxTokens, m); err != nil {
				srv.Close()
				return nil, err
			}
		}
	}
	what := "--ctx"
	if !d.CtxGiven {
		what = "--prompt-limit + --max-tokens"
	} else if err := beyondTraining("--ctx", opt.SeqContext, m); err != nil {
		srv.Close()
		return nil, err
	}
	if srv.Engine, err = m.NewEngine(opt); err != nil {
		srv.Close()
		if errors.Is(err, engine.ErrNoMemory) {
			return nil, fmt.Errorf("%s (%d tokens per sequence) with %d slots: %w", what, opt.SeqContext, opt.Slots, err)
		}
		return nil, err
	}
	return srv, nil
}

// checkLengths checks what a sequence of an agent holds against model m: its response
// (maxTokens) must fit m's trained context, and the prompt limit plus the response must
// fit Ctx when it was given, else, when the prompt limit was given, the trained context
// (each slot's KV cache has room for both: a limit of a million tokens allocated gigabytes
// before llama.cpp failed). The default limit is not held to a short trained context: a
// sequence may run past it, as with llama.cpp.
func (d *Debate) checkLengths(maxTokens int, m *engine.Model) error {
	if err := beyondTraining("--max-tokens", maxTokens, m); err != nil {
		return err
	}
	limit, trained := d.Settings.PromptLimit, m.TrainedContext()
	switch {
	case d.CtxGiven && limit > d.Settings.Ctx-maxTokens:
		return fmt.Errorf("--prompt-limit %d plus --max-tokens %d is more than --ctx %d", limit, maxTokens, d.Settings.Ctx)
	case !d.CtxGiven && d.PromptLimitGiven && trained > 0 && limit > trained-maxTokens:
		return fmt.Errorf("--prompt-limit %d plus --max-tokens %d is more than the %d tokens of context %s was trained with", limit, maxTokens, trained, m.Path())
	}
	return nil
}

// beyondTraining refuses a length n of a setting that is more than model m's trained
// context (llama.cpp's n_ctx_train, max_position_embeddings).
func beyondTraining(setting string, n int, m *engine.Model) error {
	if trained := m.TrainedContext(); trained > 0 && n > trained {
		return fmt.Errorf("%s %d is more than the %d tokens of context %s was trained with", setting, n, trained, m.Path())
	}
	return nil
}

// openVerifier loads the verifier model for the run's budget; nil without one.
func (d *Debate) openVerifier(threads int) (*verifier.Session, error) {
	s := d.Settings
	if s.Verifier == "" {
		return nil, nil
	}
	template, err := verifier.ReadTemplate(s.VerifierPrompt)
	if err != nil {
		return nil, err
	}
	opt, err := engine.ParseOptions(0, 0, threads, s.KVType, s.FlashAttn)
	if err != nil {
		return nil, err
	}
	v, err := verifier.Open(s.Verifier, template, d.Placement, opt)
	if err != nil {
		return nil, err
	}
	return &verifier.Session{Verifier: v, Budget: s.VerifierBudget}, nil
}

// printSharing says how many prompt tokens the engines' shared prefixes saved.
func (m *debateModels) printSharing(d *Debate) {
	var decoded, naive int64
	for _, srv := range m.servers {
		st := srv.Engine.Stats()
		decoded, naive = decoded+st.PromptTokens, naive+st.NaivePromptTokens
	}
	if naive > 0 { // nothing was generated when a resumed run had every problem done
		fmt.Fprintf(d.Stderr, "prompt tokens: %d decoded of %d, %.1f%% shared\n", decoded, naive, 100*(1-float64(decoded)/float64(naive)))
	}
}
