package engine

// The debate runner: N agents, T turns, K trajectories per problem, with problems
// pipelined so every agent's generator keeps its slots busy while other problems wait
// for their peers (spec/UMAD-reference.md section 1).

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/reward"
	"github.com/umad-dev/umad/sampler"
)

// Generator is what the debate needs of a model: *Engine (llama.cpp), or a deterministic
// fake in the protocol's tests. Agents holding the same Generator value share it, so its
// dynamic type must be comparable (a pointer).
type Generator interface {
	// Serve generates the requests pushed to q, calling emit with each result, until q
	// is closed and drained or ctx ends; requests may be pushed while it serves. Queue's
	// consuming side is unexported, so generators live in this package.
	Serve(ctx context.Context, q *Queue, emit func(Result)) error
	// Tokenize turns a rendered chat prompt into ids, special tokens parsed, none added.
	Tokenize(text string) ([]int32, error)
	// Detokenize turns generated ids into text without special tokens.
	Detokenize(tokens []int32) (string, error)
	SeqContext() int // most tokens per sequence, prompt plus response
	Slots() int      // sequences generated at once
}

// DebateAgent is one debater. Agents may share a Generator (the same model).
type DebateAgent struct {
	Name      string
	Generator Generator
	Format    chat.Format
	Params    sampler.Params
	MaxTokens int
	Seed      uint64
}

// DebateConfig describes a debate evaluation.
type DebateConfig struct {
	Agents []DebateAgent
	Turns  int // T: turn 0 plus T-1 debate rounds
	K      int // trajectories per problem
	Prompt DebatePrompt
	// PromptLimit is the most prompt tokens an agent gets (the reference's 5120); debate
	// prompts over it are shortened by trimming the peers' reasoning from the left.
	PromptLimit int
	// StopAgree ends a trajectory's debate once all agents gave the same answer for this
	// many consecutive turns (0 = off); its last answers are carried to later turns.
	StopAgree int
	// StopEU ends a problem's debate once the epistemic uncertainty of its answers at a
	// turn, as EU computes it, is below this (0 = off).
	StopEU float64
	// EU computes the epistemic uncertainty of one turn's verdicts, byAgent[a][k]; StopEU
	// needs it. The caller supplies uncertainty.TurnEU: the metrics package sits beside
	// the engine, not below it.
	EU func(byAgent [][]reward.Verdict) (float64, error)
	// InFlight is the most problems debated at once (0 = enough to keep every slot busy).
	InFlight int
	Extract  reward.ExtractOptions
}

// AgentTurn is one agent's response in one trajectory at one turn.
type AgentTurn struct {
	Prompt string `json:"prompt"` // the user message
	// PromptTokens are the ids the engine decoded: the message rendered with the agent's
	// chat format (what a trainer scores the response after).
	PromptTokens []int32   `json:"prompt_tokens"`
	Trimmed      bool      `json:"trimmed,omitempty"`
	Text         string    `json:"text"`
	Tokens       []int32   `json:"tokens"`
	LogProbs     []float32 `json:"logprobs"`
	Entropies    []float32 `json:"entropies"`
	// KeptMass is the sample's top-k/top-p kept mass per token (see Sample.KeptMass);
	// absent when sampling cut nothing.
	KeptMass []float32 `json:"kept_mass,omitempty"`
	Finish   Finish    `json:"finish"`
	// Answer is the extracted final answer, nil for no answer.
	Answer *string        `json:"answer"`
	Grade  reward.Verdict `json:"grade"`
	// Carried marks a turn not generated: adaptive stopping carried the previous one.
	Carried bool `json:"carried,omitempty"`
}

// DebateRecord is everything one problem's debate produced.
type DebateRecord struct {
	Index   int          `json:"index"` // position in the problem list
	Problem data.Problem `json:"problem"`
	// Turns[t][a][k] is agent a's response in trajectory k at turn t.
	Turns [][][]AgentTurn `json:"turns"`
}

// Verdicts returns the record's verdicts agent by agent, [agent][turn][k]: the Answers
// of an uncertainty.ProblemRecord, which callers build from it (the engine does not
// import uncertainty).
func (r DebateRecord) Verdicts() [][][]reward.Verdict {
	if len(r.Turns) == 0 {
		return nil
	}
	out := make([][][]reward.Verdict, len(r.Turns[0]))
	for a := range out {
		out[a] = make([][]reward.Verdict, len(r.Turns))
	}
	for t, turn := range r.Turns {
		for a, v := range verdicts(turn) {
			out[a][t] = v
		}
	}
	return out
}

// verdicts are one turn's verdicts, [agent][k].
func verdicts(turn [][]AgentTurn) [][]reward.Verdict {
	out := make([][]reward.Verdict, len(turn))
	for a, byTraj := range turn {
		for _, at := range byTraj {
			out[a] = append(out[a], at.Grade)
		}
	}
	return out
}

// DebateStats count a run's work.
type DebateStats struct {
	Problems        int // debated to the end
	SkippedOverlong int // problems whose turn-0 prompt exceeds the prompt limit
	Generations     int // agent responses generated
	Carried         int // agent responses carried forward by adaptive stopping
	Trimmed         int // debate prompts shortened to fit the prompt limit
	GeneratedTokens int64
}

// ProblemKey is the number that, with the agent, turn and trajectory, names every
// random stream of a problem's debate; it depends on the problem alone.
func ProblemKey(p data.Problem) uint64 {
	h := fnv.New64a()
	h.Write([]byte(p.Dataset + "\x00" + p.ID))
	return h.Sum64()
}

// Debate runs the debates of the problems not skipped (skip may be nil) and calls done
// with each finished problem's record, from the calling goroutine; an error from done
// stops the run. Problems finish in any order; the records are identical whatever the
// order, since every sample draws from its own random stream.
func Debate(ctx context.Context, cfg DebateConfig, problems []data.Problem, skip func(i int) bool, done func(DebateRecord) error) (DebateStats, error) {
	if err := cfg.check(); err != nil {
		return DebateStats{}, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := newScheduler(&cfg, problems, skip, done)
	s.serve(ctx)
	err := s.run(ctx)
	if err != nil {
		cancel()
	}
	return s.stats, s.stop(ctx, err)
}

func (cfg *DebateConfig) check() error {
	switch {
	case len(cfg.Agents) == 0:
		return errors.New("debate: no agents")
	case cfg.Turns < 1:
		return fmt.Errorf("debate: turns must be at least 1, got %d", cfg.Turns)
	case cfg.K < 1:
		return fmt.Errorf("debate: K must be at least 1, got %d", cfg.K)
	case cfg.StopAgree < 0 || cfg.StopEU < 0:
		return errors.New("debate: stopping thresholds must not be negative")
	case cfg.StopEU > 0 && cfg.EU == nil:
		return errors.New("debate: stopping by EU needs an EU function")
	}
	if cfg.PromptLimit == 0 {
		cfg.PromptLimit = 5120
	}
	for i, a := range cfg.Agents {
		if a.Generator == nil {
			return fmt.Errorf("debate: agent %d has no generator", i)
		}
		if a.MaxTokens < 1 {
			return fmt.Errorf("debate: agent %d: max tokens must be at least 1", i)
		}
		if err := a.Params.Validate(); err != nil {
			return fmt.Errorf("debate: agent %d: %w", i, err)
		}
		seqCtx := a.Generator.SeqContext()
		if room := seqCtx - a.MaxTokens; room < 1 {
			return fmt.Errorf("debate: agent %d: max tokens %d leave no room for a prompt in the context of %d", i, a.MaxTokens, seqCtx)
		} else if cfg.PromptLimit > room {
			return fmt.Errorf("debate: agent %d: prompt limit %d plus max tokens %d exceed the context of %d tokens per sequence",
				i, cfg.PromptLimit, a.MaxTokens, seqCtx)
		}
	}
	return nil
}

// debate is one problem in flight.
type debate struct {
	rec     DebateRecord
	key     uint64
	turn    int
	pending int    // requests of this turn not yet back
	stopped []bool // per trajectory
	agree   []int  // consecutive turns of agreement, per trajectory
}

// pendingReq is a request to submit or in flight, and what it is for.
type pendingReq struct {
	d     *debate
	agent int
	traj  []int // trajectory of each sample
	turn  int
	msg   string
	ids   []int32 // the rendered prompt
	trim  bool
}

// scheduler is the state of one Debate call. It admits problems while fewer than
// inFlight are debated, submits each turn's requests to the agents' generators, receives
// and records their results, and advances a problem whose turn is complete to its next
// turn or to done. Only the calling goroutine touches it; generators run beside it.
type scheduler struct {
	cfg      *DebateConfig
	problems []data.Problem
	skip     func(int) bool
	done     func(DebateRecord) error
	inFlight int
	next     int // the next problem to admit
	active   int // problems in flight
	stats    DebateStats

	queues  map[Generator]*Queue // one per distinct generator
	results chan Result
	stopped chan error // a generator's Serve returned
	running int        // generators serving
	pending map[uint64]*pendingReq
	lastID  uint64
}

func newScheduler(cfg *DebateConfig, problems []data.Problem, skip func(int) bool, done func(DebateRecord) error) *scheduler {
	s := &scheduler{cfg: cfg, problems: problems, skip: skip, done: done, inFlight: cfg.InFlight,
		queues: map[Generator]*Queue{}, results: make(chan Result, 64), pending: map[uint64]*pendingReq{}}
	slots := 0
	for _, a := range cfg.Agents {
		if s.queues[a.Generator] == nil {
			s.queues[a.Generator] = NewQueue()
			slots = max(slots, a.Generator.Slots())
		}
	}
	if s.inFlight == 0 {
		s.inFlight = 2*((slots+cfg.K-1)/cfg.K) + 1
	}
	return s
}

// serve starts one serving goroutine per generator.
func (s *scheduler) serve(ctx context.Context) {
	s.stopped = make(chan error, len(s.queues))
	emit := func(r Result) {
		select {
		case s.results <- r:
		case <-ctx.Done():
		}
	}
	for g, q := range s.queues {
		go func() { s.stopped <- g.Serve(ctx, q, emit) }()
	}
	s.running = len(s.queues)
}

// run debates until every problem is done or something fails.
func (s *scheduler) run(ctx context.Context) error {
	if err := s.admit(); err != nil {
		return err
	}
	for s.active > 0 {
		select {
		case r := <-s.results:
			if err := s.receive(r); err != nil {
				return err
			}
		case err := <-s.stopped:
			s.running--
			if err == nil {
				err = errors.New("debate: a generator stopped early")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stop closes the queues and waits for the generators, returning err or else the first
// of their errors, or else ctx's.
func (s *scheduler) stop(ctx context.Context, err error) error {
	for _, q := range s.queues {
		q.Close()
	}
	for ; s.running > 0; s.running-- {
		if e := <-s.stopped; err == nil && e != nil && !errors.Is(e, context.Canceled) {
			err = e
		}
	}
	if err == nil {
		err = ctx.Err()
	}
	return err
}

// admit starts problems' debates until inFlight are running or none is left.
func (s *scheduler) admit() error {
	for s.active < s.inFlight && s.next < len(s.problems) {
		i := s.next
		s.next++
		if s.skip != nil && s.skip(i) {
			continue
		}
		p := s.problems[i]
		d := &debate{rec: DebateRecord{Index: i, Problem: p, Turns: make([][][]AgentTurn, s.cfg.Turns)},
			key: ProblemKey(p), stopped: make([]bool, s.cfg.K), agree: make([]int, s.cfg.K)}
		reqs, err := s.turn0(d)
		if err != nil {
			return err
		}
		if reqs == nil {
			s.stats.SkippedOverlong++
			slog.Warn("problem skipped: its prompt exceeds the prompt limit", "dataset", p.Dataset, "id", p.ID)
			continue
		}
		for _, r := range reqs {
			s.submit(r, s.cfg.K)
		}
		s.active++
	}
	return nil
}

// submit queues a request for k samples with its agent's generator.
func (s *scheduler) submit(p *pendingReq, k int) {
	a := s.cfg.Agents[p.agent]
	s.lastID++
	stream := []uint64{p.d.key, uint64(p.agent), uint64(p.turn)}
	if p.turn > 0 {
		stream = append(stream, uint64(p.traj[0]))
	}
	s.pending[s.lastID] = p
	p.d.pending++
	s.queues[a.Generator].Push(Request{ID: s.lastID, Prompt: p.ids, K: k, MaxTokens: a.MaxTokens,
		Params: a.Params, Seed: a.Seed, Stream: stream})
}

// receive records a result; when it completes its problem's turn, the problem advances
// to the next turn's requests or, with none, is done and makes room for the next one.
func (s *scheduler) receive(r Result) error {
	if r.Err != nil {
		return r.Err
	}
	p := s.pending[r.Request.ID]
	delete(s.pending, r.Request.ID)
	d := p.d
	if err := s.record(p, r.Samples); err != nil {
		return err
	}
	if d.pending--; d.pending > 0 {
		return nil
	}
	reqs, err := s.advance(d)
	if err != nil {
		return err
	}
	for _, q := range reqs {
		s.submit(q, 1)
	}
	if d.pending > 0 {
		return nil
	}
	s.active--
	s.stats.Problems++
	if err := s.done(d.rec); err != nil {
		return err
	}
	return s.admit()
}

// render renders a user message with an agent's chat format and tokenizes it, through
// memo: building a turn tokenizes the same prompt many times (FitMessage counts it, up to
// a dozen times when it trims, the request then needs its ids, and agents on one model
// and format get the same message), and llama.cpp's BPE tokenizer compiles its split
// regex (std::regex) on every call: about 1 ms a call with Qwen2.5's tokenizer before
// any text is split.
func (s *scheduler) render(agent int, msg string, memo tokenMemo) ([]int32, error) {
	a := s.cfg.Agents[agent]
	return UserPrompt(a.Format, msg, func(text string) ([]int32, error) {
		k := tokenKey{a.Generator, text}
		if ids, ok := memo[k]; ok {
			return ids, nil
		}
		ids, err := a.Generator.Tokenize(text)
		if err == nil {
			memo[k] = ids
		}
		return ids, err
	})
}

// tokenMemo holds the tokenizations made while building one problem's turn; the requests
// built from them share the ids (nothing writes to a prompt).
type tokenMemo map[tokenKey][]int32

type tokenKey struct {
	g    Generator
	text string
}

// UserPrompt renders one user message in a chat format and tokenizes it with tokenize (a
// chat prompt's tokenization: special tokens parsed, none added): how every debate prompt
// is built, so training pairs built with it have the ids the debate decodes.
func UserPrompt(f chat.Format, msg string, tokenize func(text string) ([]int32, error)) ([]int32, error) {
	text, err := f.Render([]chat.Message{{Role: "user", Content: msg}}, chat.Options{})
	if err != nil {
		return nil, fmt.Errorf("render prompt: %w", err)
	}
	ids, err := tokenize(text)
	if err != nil {
		return nil, fmt.Errorf("tokenize prompt: %w", err)
	}
	return ids, nil
}

// turn0 builds each agent's turn-0 request, or nil if the prompt is too long.
func (s *scheduler) turn0(d *debate) ([]*pendingReq, error) {
	msg := Turn0Message(d.rec.Problem.Question)
	var out []*pendingReq
	memo := tokenMemo{}
	for a := range s.cfg.Agents {
		toks, err := s.render(a, msg, memo)
		if err != nil {
			return nil, err
		}
		if len(toks) > s.cfg.PromptLimit {
			return nil, nil
		}
		traj := make([]int, s.cfg.K)
		for k := range traj {
			traj[k] = k
		}
		out = append(out, &pendingReq{d: d, agent: a, traj: traj, turn: 0, msg: msg, ids: toks})
	}
	d.rec.Turns[0] = make([][]AgentTurn, len(s.cfg.Agents))
	for a := range d.rec.Turns[0] {
		d.rec.Turns[0][a] = make([]AgentTurn, s.cfg.K)
	}
	return out, nil
}

// record stores a request's samples in the debate record, graded.
func (s *scheduler) record(p *pendingReq, samples []Sample) error {
	d := p.d
	g := s.cfg.Agents[p.agent].Generator
	for i, smp := range samples {
		text, err := g.Detokenize(smp.Tokens)
		if err != nil {
			return err
		}
		at := AgentTurn{Prompt: p.msg, PromptTokens: p.ids, Trimmed: p.trim, Text: text, Tokens: smp.Tokens,
			LogProbs: smp.LogProbs, Entropies: smp.Entropies, KeptMass: smp.KeptMass, Finish: smp.Finish}
		v, ans := reward.Grade(text, d.rec.Problem.Gold, s.cfg.Extract)
		if !v.NoAnswer {
			at.Answer = &ans
		}
		v.Tokens = len(smp.Tokens)
		v.Truncated = smp.Finish == FinishLength
		var ent, nll float64
		for j := range smp.Tokens {
			ent += float64(smp.Entropies[j])
			nll -= float64(smp.LogProbs[j])
		}
		if n := float64(len(smp.Tokens)); n > 0 {
			v.MeanEntropy, v.MeanNLL = ent/n, nll/n
		}
		at.Grade = v
		d.rec.Turns[p.turn][p.agent][p.traj[i]] = at
		s.stats.Generations++
		s.stats.GeneratedTokens += int64(len(smp.Tokens))
	}
	return nil
}

// advance applies adaptive stopping after the debate's current turn and builds the next
// turn's requests; none means the debate is over (all later turns carried forward).
func (s *scheduler) advance(d *debate) ([]*pendingReq, error) {
	for {
		if err := s.applyStops(d); err != nil {
			return nil, err
		}
		if d.turn+1 >= s.cfg.Turns {
			return nil, nil
		}
		out, err := s.nextTurn(d)
		if len(out) > 0 || err != nil {
			return out, err
		}
		// Every trajectory stopped: the turn was carried forward whole; go on to the next.
	}
}

// applyStops marks the trajectories that the stopping rules end after the current turn.
func (s *scheduler) applyStops(d *debate) error {
	cur := d.rec.Turns[d.turn]
	if s.cfg.StopAgree > 0 {
		for k := range d.agree {
			if d.stopped[k] {
				continue
			}
			if agreed(cur, k) {
				d.agree[k]++
			} else {
				d.agree[k] = 0
			}
			if d.agree[k] >= s.cfg.StopAgree {
				d.stopped[k] = true
			}
		}
	}
	if s.cfg.StopEU > 0 {
		eu, err := s.cfg.EU(verdicts(cur))
		if err != nil {
			return fmt.Errorf("problem %s turn %d: %w", d.rec.Problem.ID, d.turn, err)
		}
		if eu < s.cfg.StopEU {
			for k := range d.stopped {
				d.stopped[k] = true
			}
		}
	}
	return nil
}

// nextTurn starts the next turn: stopped trajectories carry their responses forward, the
// others get one request per agent.
func (s *scheduler) nextTurn(d *debate) ([]*pendingReq, error) {
	cur := d.rec.Turns[d.turn]
	d.turn++
	next := make([][]AgentTurn, len(s.cfg.Agents))
	for a := range next {
		next[a] = make([]AgentTurn, s.cfg.K)
	}
	d.rec.Turns[d.turn] = next
	// The reference recovers the question from the turn-0 message (remove_template).
	question := RemoveTemplate(Turn0Message(d.rec.Problem.Question))
	var out []*pendingReq
	memo := tokenMemo{}
	for k := range s.cfg.K {
		if d.stopped[k] {
			for a := range next {
				c := cur[a][k]
				c.Prompt, c.PromptTokens, c.Trimmed, c.Tokens, c.LogProbs, c.Entropies, c.KeptMass = "", nil, false, nil, nil, nil, nil
				c.Carried = true
				next[a][k] = c
				s.stats.Carried++
			}
			continue
		}
		rounds := d.rounds(k)
		for a := range s.cfg.Agents {
			count := func(msg string) (int, error) {
				toks, err := s.render(a, msg, memo)
				return len(toks), err
			}
			msg, trimmed, err := s.cfg.Prompt.FitMessage(question, rounds,
				TrajectoryID{Problem: d.key, Trajectory: uint64(k)}, count, s.cfg.PromptLimit)
			if err != nil {
				return nil, fmt.Errorf("problem %s: %w", d.rec.Problem.ID, err)
			}
			if trimmed {
				s.stats.Trimmed++
			}
			toks, err := s.render(a, msg, memo)
			if err != nil {
				return nil, err
			}
			out = append(out, &pendingReq{d: d, agent: a, traj: []int{k}, turn: d.turn, msg: msg, ids: toks, trim: trimmed})
		}
	}
	return out, nil
}

// rounds are trajectory k's responses so far, rounds[t][a], as the next prompt shows them.
func (d *debate) rounds(k int) [][]string {
	var out [][]string
	for t := 0; t <= d.turn-1; t++ {
		var r []string
		for _, byTraj := range d.rec.Turns[t] {
			r = append(r, byTraj[k].Text)
		}
		out = append(out, r)
	}
	return out
}

// agreed reports whether every agent of trajectory k gave the same (present) answer.
func agreed(turn [][]AgentTurn, k int) bool {
	var keys []string
	for a := range turn {
		g := turn[a][k].Grade
		if g.NoAnswer {
			return false
		}
		keys = append(keys, g.Key)
	}
	return len(slices.Compact(keys)) == 1
}
