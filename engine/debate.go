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
	// Serve takes requests from q and emits their results until q is closed and drained
	// or ctx ends; emit may be followed by more pushes to q (Engine.Serve).
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
	Finish       Finish    `json:"finish"`
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

// debate is one problem in flight.
type debate struct {
	rec     DebateRecord
	key     uint64
	turn    int
	pending int    // requests of this turn not yet back
	stopped []bool // per trajectory
	agree   []int  // consecutive turns of agreement, per trajectory
}

// pendingReq says what a request in flight is for.
type pendingReq struct {
	d     *debate
	agent int
	traj  []int // trajectory of each sample
	turn  int
	msg   string
	ids   []int32
	trim  bool
}

// Debate runs the debates of the problems not skipped (skip may be nil) and calls done
// with each finished problem's record, from the calling goroutine; an error from done
// stops the run. Problems finish in any order; the records are identical whatever the
// order, since every sample draws from its own random stream.
func Debate(ctx context.Context, cfg DebateConfig, problems []data.Problem, skip func(i int) bool, done func(DebateRecord) error) (DebateStats, error) {
	var stats DebateStats
	if err := cfg.check(); err != nil {
		return stats, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// One queue and one serving goroutine per distinct generator.
	var gens []Generator
	queues := map[Generator]*Queue{}
	for _, a := range cfg.Agents {
		if queues[a.Generator] == nil {
			gens = append(gens, a.Generator)
			queues[a.Generator] = NewQueue()
		}
	}
	results := make(chan Result, 64)
	served := make(chan error, len(gens))
	for _, g := range gens {
		go func() {
			served <- g.Serve(ctx, queues[g], func(r Result) {
				select {
				case results <- r:
				case <-ctx.Done():
				}
			})
		}()
	}
	closeAll := func() {
		for _, q := range queues {
			q.Close()
		}
	}
	running := len(gens)
	// wait for the generators to stop, returning the first error among theirs.
	wait := func(err error) (DebateStats, error) {
		if err != nil {
			cancel()
		}
		closeAll()
		for ; running > 0; running-- {
			if e := <-served; err == nil && e != nil && !errors.Is(e, context.Canceled) {
				err = e
			}
		}
		if err == nil {
			err = ctx.Err()
		}
		return stats, err
	}

	inFlight := cfg.InFlight
	if inFlight == 0 {
		slots := 0
		for _, g := range gens {
			slots = max(slots, g.Slots())
		}
		inFlight = 2*((slots+cfg.K-1)/cfg.K) + 1
	}
	pending := map[uint64]*pendingReq{}
	var nextID uint64
	submit := func(p *pendingReq, prompt []int32, k int) {
		a := cfg.Agents[p.agent]
		nextID++
		stream := []uint64{p.d.key, uint64(p.agent), uint64(p.turn)}
		if p.turn > 0 {
			stream = append(stream, uint64(p.traj[0]))
		}
		pending[nextID] = p
		p.d.pending++
		queues[a.Generator].Push(Request{ID: nextID, Prompt: prompt, K: k, MaxTokens: a.MaxTokens,
			Params: a.Params, Seed: a.Seed, Stream: stream})
	}

	active := 0
	next := 0
	admit := func() error {
		for active < inFlight && next < len(problems) {
			i := next
			next++
			if skip != nil && skip(i) {
				continue
			}
			d := &debate{rec: DebateRecord{Index: i, Problem: problems[i], Turns: make([][][]AgentTurn, cfg.Turns)},
				key: ProblemKey(problems[i]), stopped: make([]bool, cfg.K), agree: make([]int, cfg.K)}
			reqs, err := cfg.turn0(d)
			if err != nil {
				return err
			}
			if reqs == nil {
				stats.SkippedOverlong++
				slog.Warn("problem skipped: its prompt exceeds the prompt limit", "dataset", problems[i].Dataset, "id", problems[i].ID)
				continue
			}
			for _, r := range reqs {
				submit(r.p, r.prompt, cfg.K)
			}
			active++
		}
		return nil
	}
	if err := admit(); err != nil {
		return wait(err)
	}
	for active > 0 {
		var r Result
		select {
		case r = <-results:
		case err := <-served:
			running--
			if err == nil {
				err = errors.New("debate: a generator stopped early")
			}
			return wait(err)
		case <-ctx.Done():
			return wait(ctx.Err())
		}
		if r.Err != nil {
			return wait(r.Err)
		}
		p := pending[r.Request.ID]
		delete(pending, r.Request.ID)
		d := p.d
		if err := cfg.record(d, p, r.Samples, &stats); err != nil {
			return wait(err)
		}
		if d.pending--; d.pending > 0 {
			continue
		}
		// The turn is complete: decide what stops, then start the next turn or finish.
		reqs, err := cfg.advance(d, &stats)
		if err != nil {
			return wait(err)
		}
		for _, q := range reqs {
			submit(q.p, q.prompt, 1)
		}
		if d.pending == 0 {
			active--
			stats.Problems++
			if err := done(d.rec); err != nil {
				return wait(err)
			}
			if err := admit(); err != nil {
				return wait(err)
			}
		}
	}
	return wait(nil)
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

type newRequest struct {
	p      *pendingReq
	prompt []int32
}

// render renders a user message with an agent's chat format and tokenizes it.
func (cfg *DebateConfig) render(agent int, msg string) ([]int32, error) {
	a := cfg.Agents[agent]
	text, err := a.Format.Render([]chat.Message{{Role: "user", Content: msg}}, chat.Options{})
	if err != nil {
		return nil, err
	}
	return a.Generator.Tokenize(text)
}

// turn0 builds each agent's turn-0 request, or nil if the prompt is too long.
func (cfg *DebateConfig) turn0(d *debate) ([]newRequest, error) {
	msg := Turn0Message(d.rec.Problem.Question)
	var out []newRequest
	for a := range cfg.Agents {
		toks, err := cfg.render(a, msg)
		if err != nil {
			return nil, err
		}
		if len(toks) > cfg.PromptLimit {
			return nil, nil
		}
		traj := make([]int, cfg.K)
		for k := range traj {
			traj[k] = k
		}
		out = append(out, newRequest{&pendingReq{d: d, agent: a, traj: traj, turn: 0, msg: msg, ids: toks}, toks})
	}
	d.rec.Turns[0] = make([][]AgentTurn, len(cfg.Agents))
	for a := range d.rec.Turns[0] {
		d.rec.Turns[0][a] = make([]AgentTurn, cfg.K)
	}
	return out, nil
}

// record stores a request's samples in the debate record, graded.
func (cfg *DebateConfig) record(d *debate, p *pendingReq, samples []Sample, stats *DebateStats) error {
	g := cfg.Agents[p.agent].Generator
	for i, s := range samples {
		text, err := g.Detokenize(s.Tokens)
		if err != nil {
			return err
		}
		at := AgentTurn{Prompt: p.msg, PromptTokens: p.ids, Trimmed: p.trim, Text: text, Tokens: s.Tokens,
			LogProbs: s.LogProbs, Entropies: s.Entropies, Finish: s.Finish}
		v, ans := reward.Grade(text, d.rec.Problem.Gold, cfg.Extract)
		if !v.NoAnswer {
			at.Answer = &ans
		}
		v.Tokens = len(s.Tokens)
		v.Truncated = s.Finish == FinishLength
		var ent, nll float64
		for j := range s.Tokens {
			ent += float64(s.Entropies[j])
			nll -= float64(s.LogProbs[j])
		}
		if n := float64(len(s.Tokens)); n > 0 {
			v.MeanEntropy, v.MeanNLL = ent/n, nll/n
		}
		at.Grade = v
		d.rec.Turns[p.turn][p.agent][p.traj[i]] = at
		stats.Generations++
		stats.GeneratedTokens += int64(len(s.Tokens))
	}
	return nil
}

// advance applies adaptive stopping after the debate's current turn and builds the next
// turn's requests; none means the debate is over (all later turns carried forward).
func (cfg *DebateConfig) advance(d *debate, stats *DebateStats) ([]newRequest, error) {
	t := d.turn
	cur := d.rec.Turns[t]
	if cfg.StopAgree > 0 {
		for k := range d.agree {
			if d.stopped[k] {
				continue
			}
			if agreed(cur, k) {
				d.agree[k]++
			} else {
				d.agree[k] = 0
			}
			if d.agree[k] >= cfg.StopAgree {
				d.stopped[k] = true
			}
		}
	}
	if cfg.StopEU > 0 {
		eu, err := cfg.EU(verdicts(cur))
		if err != nil {
			return nil, fmt.Errorf("problem %s turn %d: %w", d.rec.Problem.ID, t, err)
		}
		if eu < cfg.StopEU {
			for k := range d.stopped {
				d.stopped[k] = true
			}
		}
	}
	if t+1 >= cfg.Turns {
		return nil, nil
	}
	d.turn++
	next := make([][]AgentTurn, len(cfg.Agents))
	for a := range next {
		next[a] = make([]AgentTurn, cfg.K)
	}
	d.rec.Turns[d.turn] = next
	var out []newRequest
	for k := 0; k < cfg.K; k++ {
		if d.stopped[k] {
			for a := range next {
				c := cur[a][k]
				c.Prompt, c.PromptTokens, c.Trimmed, c.Tokens, c.LogProbs, c.Entropies = "", nil, false, nil, nil, nil
				c.Carried = true
				next[a][k] = c
				stats.Carried++
			}
			continue
		}
		rounds := d.rounds(k)
		for a := range cfg.Agents {
			count := func(msg string) int {
				toks, err := cfg.render(a, msg)
				if err != nil {
					return 1 << 30
				}
				return len(toks)
			}
			// The reference recovers the question from the turn-0 message (remove_template).
			msg, trimmed, err := cfg.Prompt.FitMessage(RemoveTemplate(Turn0Message(d.rec.Problem.Question)), rounds,
				TrajectoryID{Problem: d.key, Trajectory: uint64(k)}, count, cfg.PromptLimit)
			if err != nil {
				return nil, fmt.Errorf("problem %s: %w", d.rec.Problem.ID, err)
			}
			if trimmed {
				stats.Trimmed++
			}
			toks, err := cfg.render(a, msg)
			if err != nil {
				return nil, err
			}
			out = append(out, newRequest{&pendingReq{d: d, agent: a, traj: []int{k}, turn: d.turn, msg: msg, ids: toks, trim: trimmed}, toks})
		}
	}
	if len(out) == 0 {
		// Every trajectory stopped: carry the remaining turns forward at once.
		return cfg.advance(d, stats)
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
