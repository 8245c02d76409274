package debate

// The debate's scheduler: which problems are in flight, each turn's requests to the
// agents' generators, and what their results advance.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
)

// errUntokenizable is a prompt longer than llama.cpp tokenizes: its problem is skipped as
// one whose prompt exceeds the prompt limit, not the end of the debate.
var errUntokenizable = fmt.Errorf("the prompt is longer than the %d bytes umad tokenizes", engine.MaxTokenizeBytes)

// debate is one problem in flight.
type flight struct {
	rec     Record
	key     uint64
	turn    int
	pending int    // requests of this turn not yet back
	stopped []bool // per trajectory (under Probe, one: the debate's)
	agree   []int  // consecutive turns of agreement, per trajectory
}

// pendingReq is a request to submit or in flight, and what it is for.
type pendingReq struct {
	d     *flight
	agent int
	traj  []int // trajectory (under Probe, probe) of each sample
	turn  int
	msg   string
	ids   []int32 // the rendered prompt
	trim  bool
	cont  bool // Probe's continuation, one sample
}

// scheduler is the state of one Debate call. It admits problems while fewer than
// inFlight are debated, submits each turn's requests to the agents' generators, receives
// and records their results, and advances a problem whose turn is complete to its next
// turn or to done. Only the calling goroutine touches it; generators run beside it.
type scheduler struct {
	cfg      *Config
	problems []data.Problem
	skip     func(int) bool
	done     func(Record) error
	inFlight int
	next     int // the next problem to admit
	active   int // problems in flight
	stats    Stats

	queues  map[Generator]*engine.Queue // one per distinct generator
	gens    []Generator                 // the distinct generators in agent order
	results chan engine.Result
	// stepped holds each generator's results of the current step of a deterministic
	// debate, received once every generator has stepped, in generator order.
	stepped [][]engine.Result // per generator, in gens' order
	stopped chan error        // a generator's Serve returned
	running int               // generators serving
	pending map[uint64]*pendingReq
	lastID  uint64
}

func newScheduler(cfg *Config, problems []data.Problem, skip func(int) bool, done func(Record) error) *scheduler {
	s := &scheduler{cfg: cfg, problems: problems, skip: skip, done: done, inFlight: cfg.InFlight,
		queues: map[Generator]*engine.Queue{}, results: make(chan engine.Result, 64), pending: map[uint64]*pendingReq{}}
	slots := 0
	for _, a := range cfg.Agents {
		if s.queues[a.Generator] == nil {
			s.queues[a.Generator] = engine.NewQueue()
			if cfg.Deterministic {
				s.queues[a.Generator] = engine.NewSteppedQueue()
			}
			s.gens = append(s.gens, a.Generator)
			slots = max(slots, a.Generator.Slots())
		}
	}
	if cfg.Deterministic {
		s.stepped = make([][]engine.Result, len(s.gens))
	}
	if s.inFlight == 0 {
		s.inFlight = 2*((slots+cfg.K-1)/cfg.K) + 1
	}
	return s
}

// serve starts one serving goroutine per generator.
func (s *scheduler) serve(ctx context.Context) {
	s.stopped = make(chan error, len(s.queues))
	emit := func(r engine.Result) {
		select {
		case s.results <- r:
		case <-ctx.Done():
		}
	}
	for i, g := range s.gens {
		q, emit := s.queues[g], emit
		if q.Stepped() { // only g's goroutine appends, and only between tick and tock
			emit = func(r engine.Result) { s.stepped[i] = append(s.stepped[i], r) }
		}
		go func() { s.stopped <- g.Serve(ctx, q, emit) }()
	}
	s.running = len(s.queues)
}

// run debates until every problem is done or something fails.
func (s *scheduler) run(ctx context.Context) error {
	if err := s.admit(); err != nil {
		return err
	}
	if s.cfg.Deterministic {
		return s.runStepped(ctx)
	}
	for s.active > 0 {
		select {
		case r := <-s.results:
			if err := s.receive(r); err != nil {
				return err
			}
		case err := <-s.stopped:
			return s.generatorStopped(err)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// generatorStopped accounts for a generator whose Serve returned while the debate still
// needed it, and says why the debate cannot go on.
func (s *scheduler) generatorStopped(err error) error {
	s.running--
	if err == nil {
		return errors.New("debate: a generator stopped early")
	}
	return err
}

// runStepped debates on a step clock: every generator takes the requests given so far
// and decodes one step, all at once; then their results are received in generator
// order, which pushes the next requests. Each generator's batches are then a function of
// the debate's state, whatever the generators' speeds and the machine's load.
func (s *scheduler) runStepped(ctx context.Context) error {
	for s.active > 0 {
		for _, g := range s.gens {
			s.queues[g].Tick()
		}
		for _, g := range s.gens {
			select {
			case <-s.queues[g].Tock():
			case err := <-s.stopped:
				return s.generatorStopped(err)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		for i := range s.gens {
			for _, r := range s.stepped[i] {
				if err := s.receive(r); err != nil {
					return err
				}
			}
			s.stepped[i] = s.stepped[i][:0]
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
		threads := s.cfg.K
		if s.cfg.Protocol == Probe {
			threads = 1
		}
		d := &flight{rec: Record{Index: i, Problem: p, Turns: make([][][]AgentTurn, s.cfg.Turns)},
			key: ProblemKey(p), stopped: make([]bool, threads), agree: make([]int, threads)}
		if s.cfg.Protocol == Probe {
			d.rec.Continuations = make([][]AgentTurn, s.cfg.Turns)
		}
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
			s.submit(r)
		}
		s.active++
	}
	return nil
}

// submit queues a request for a sample per entry of p.traj with its agent's generator.
// Its stream is [problem, agent, turn] for the samples of one context (turn 0's, and
// Probe's probes), with the trajectory appended for a later turn's trajectory, and
// with K appended for Probe's continuation (so it draws apart from the probes).
func (s *scheduler) submit(p *pendingReq) {
	a := s.cfg.Agents[p.agent]
	s.lastID++
	stream := []uint64{p.d.key, uint64(p.agent), uint64(p.turn)}
	params := a.Params
	switch {
	case p.cont:
		stream = append(stream, uint64(s.cfg.K))
		if s.cfg.GreedyContinuation {
			params.Temperature = 0
		}
	case p.turn > 0 && s.cfg.Protocol == Trajectories:
		stream = append(stream, uint64(p.traj[0]))
	}
	s.pending[s.lastID] = p
	p.d.pending++
	s.queues[a.Generator].Push(engine.Request{ID: s.lastID, Prompt: p.ids, K: len(p.traj), MaxTokens: a.MaxTokens,
		Params: params, Seed: a.Seed, Stream: stream})
}

// receive records a result; when it completes its problem's turn, the problem advances
// to the next turn's requests or, with none, is done and makes room for the next one.
func (s *scheduler) receive(r engine.Result) error {
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
		s.submit(q)
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
		if len(text) > engine.MaxTokenizeBytes {
			return nil, errUntokenizable
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

// turn0 builds each agent's turn-0 request, or nil if the prompt is too long.
func (s *scheduler) turn0(d *flight) ([]*pendingReq, error) {
	msg := Turn0Message(d.rec.Problem.Question)
	var out []*pendingReq
	memo := tokenMemo{}
	for a := range s.cfg.Agents {
		toks, err := s.render(a, msg, memo)
		if errors.Is(err, errUntokenizable) || err == nil && len(toks) > s.cfg.PromptLimit {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		traj := make([]int, s.cfg.K)
		for k := range traj {
			traj[k] = k
		}
		out = append(out, s.withContinuation(&pendingReq{d: d, agent: a, traj: traj, turn: 0, msg: msg, ids: toks})...)
	}
	s.makeTurn(d, 0)
	return out, nil
}

// makeTurn allocates turn t of d's record.
func (s *scheduler) makeTurn(d *flight, t int) {
	d.rec.Turns[t] = make([][]AgentTurn, len(s.cfg.Agents))
	for a := range d.rec.Turns[t] {
		d.rec.Turns[t][a] = make([]AgentTurn, s.cfg.K)
	}
	if s.cfg.Protocol == Probe {
		d.rec.Continuations[t] = make([]AgentTurn, len(s.cfg.Agents))
	}
}

// withContinuation is p, followed under Probe by the continuation from p's context. The
// identical prompt lets the engine decode it once for both (prefix sharing).
func (s *scheduler) withContinuation(p *pendingReq) []*pendingReq {
	if s.cfg.Protocol != Probe {
		return []*pendingReq{p}
	}
	c := *p
	c.traj, c.cont = []int{0}, true
	return []*pendingReq{p, &c}
}

// record stores a request's samples in the debate record, graded.
func (s *scheduler) record(p *pendingReq, samples []engine.Sample) error {
	d := p.d
	g := s.cfg.Agents[p.agent].Generator
	for i, smp := range samples {
		text, err := g.Detokenize(smp.Tokens)
		if err != nil {
			return err
		}
		at := AgentTurn{Prompt: p.msg, PromptTokens: p.ids, Trimmed: p.trim, Text: text, Tokens: smp.Tokens,
			LogProbs: smp.LogProbs, Entropies: smp.Entropies, KeptMass: smp.KeptMass, Finish: smp.Finish}
		v, ans := grade.Grade(text, d.rec.Problem.Gold, s.cfg.Extract)
		if !v.NoAnswer {
			at.Answer = &ans
		}
		v.Tokens = len(smp.Tokens)
		v.Truncated = smp.Finish == engine.FinishLength
		var ent, nll float64
		for j := range smp.Tokens {
			ent += float64(smp.Entropies[j])
			nll -= float64(smp.LogProbs[j])
		}
		if n := float64(len(smp.Tokens)); n > 0 {
			v.MeanEntropy, v.MeanNLL = ent/n, nll/n
		}
		at.Grade = v
		if p.cont {
			d.rec.Continuations[p.turn][p.agent] = at
		} else {
			d.rec.Turns[p.turn][p.agent][p.traj[i]] = at
		}
		s.stats.Generations++
		s.stats.GeneratedTokens += int64(len(smp.Tokens))
	}
	return nil
}

// advance applies adaptive stopping after the debate's current turn and builds the next
// turn's requests; none means the debate is over (all later turns carried forward).
func (s *scheduler) advance(d *flight) ([]*pendingReq, error) {
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
func (s *scheduler) applyStops(d *flight) error {
	cur := d.rec.Turns[d.turn]
	if s.cfg.StopAgree > 0 {
		threads := cur
		if s.cfg.Protocol == Probe { // the debate goes on with the continuations
			threads = column(d.rec.Continuations[d.turn])
		}
		for k := range d.agree {
			if d.stopped[k] {
				continue
			}
			if agreed(threads, k) {
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
// others get one request per agent (under Probe, the debate's one thread gets each agent
// K probes and a continuation).
func (s *scheduler) nextTurn(d *flight) ([]*pendingReq, error) {
	cur := d.rec.Turns[d.turn]
	d.turn++
	s.makeTurn(d, d.turn)
	next := d.rec.Turns[d.turn]
	probe := s.cfg.Protocol == Probe
	var out []*pendingReq
	memo := tokenMemo{}
	for k := range d.stopped {
		if d.stopped[k] {
			for a := range next {
				if probe {
					for j := range next[a] {
						next[a][j] = s.carry(cur[a][j])
					}
					d.rec.Continuations[d.turn][a] = s.carry(d.rec.Continuations[d.turn-1][a])
				} else {
					next[a][k] = s.carry(cur[a][k])
				}
			}
			continue
		}
		rounds := d.rounds(k)
		for a := range s.cfg.Agents {
			p, err := s.message(d, a, k, rounds, memo)
			if err != nil {
				return nil, err
			}
			if probe {
				p.traj = make([]int, s.cfg.K)
				for j := range p.traj {
					p.traj[j] = j
				}
			}
			out = append(out, s.withContinuation(p)...)
		}
	}
	return out, nil
}

// carry is a response carried forward to the next turn by adaptive stopping.
func (s *scheduler) carry(c AgentTurn) AgentTurn {
	c.Prompt, c.PromptTokens, c.Trimmed, c.Tokens, c.LogProbs, c.Entropies, c.KeptMass = "", nil, false, nil, nil, nil, nil
	c.Carried = true
	s.stats.Carried++
	return c
}

// message builds agent a's request for trajectory k's current turn from its rounds.
func (s *scheduler) message(d *flight, a, k int, rounds [][]string, memo tokenMemo) (*pendingReq, error) {
	// The reference recovers the question from the turn-0 message (remove_template).
	question := RemoveTemplate(Turn0Message(d.rec.Problem.Question))
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
	return &pendingReq{d: d, agent: a, traj: []int{k}, turn: d.turn, msg: msg, ids: toks, trim: trimmed}, nil
}

// rounds are trajectory k's responses so far, rounds[t][a], as the next prompt shows them
// (under Probe, the continuations).
func (d *flight) rounds(k int) [][]string {
	var out [][]string
	for t := 0; t <= d.turn-1; t++ {
		var r []string
		for a, byTraj := range d.rec.Turns[t] {
			if d.rec.Continuations != nil {
				r = append(r, d.rec.Continuations[t][a].Text)
			} else {
				r = append(r, byTraj[k].Text)
			}
		}
		out = append(out, r)
	}
	return out
}

// column is one response per agent as a turn of one trajectory, [a][0].
func column(row []AgentTurn) [][]AgentTurn {
	out := make([][]AgentTurn, len(row))
	for a := range row {
		out[a] = row[a : a+1]
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
