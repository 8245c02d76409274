package debate

// Tests of the debate protocol against a deterministic fake generator: no model, so they
// run in milliseconds. The end-to-end debate with llama.cpp is tested in cli.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/umad-dev/umad/chat"
	"github.com/umad-dev/umad/data"
	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/grade"
	"github.com/umad-dev/umad/sampler"
)

// fakeGen is a deterministic Generator: a token is a byte, and the response of a sample
// is what respond says for its prompt's user message, agent, turn and trajectory.
type fakeGen struct {
	respond func(msg string, agent, turn, traj int) string
	// failOn makes tokenizing a text that contains it fail.
	failOn string

	mu        sync.Mutex
	requests  []engine.Request
	tokenized map[string]int // calls of Tokenize per text
}

// fakeFormat is the agents' chat format; userMessage undoes it.
var fakeFormat = chat.Format{Family: chat.Qwen3}

func userMessage(prompt string) string {
	s := strings.TrimPrefix(prompt, "<|im_start|>user\n")
	return strings.TrimSuffix(s, "<|im_end|>\n<|im_start|>assistant\n")
}

func (f *fakeGen) Serve(ctx context.Context, q *engine.Queue, emit func(engine.Result)) error {
	for {
		if err := q.AwaitStep(ctx); err != nil {
			return err
		}
		for r, ok := q.Pop(); ok; r, ok = q.Pop() {
			emit(f.generate(r))
		}
		if q.Drained() {
			return nil
		}
		if q.Stepped() {
			q.EndStep()
			continue
		}
		select {
		case <-q.Ready():
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// generate answers a request. Its stream is [problem, agent, turn] for the samples of one
// context (sample k is trajectory k, or probe k) and [problem, agent, turn, trajectory]
// for a later turn's trajectory (trajectory K: the probe protocol's continuation).
func (f *fakeGen) generate(r *engine.Request) engine.Result {
	f.mu.Lock()
	f.requests = append(f.requests, *r)
	f.mu.Unlock()
	prompt, _ := f.Detokenize(r.Prompt)
	agent, turn := int(r.Stream[1]), int(r.Stream[2])
	res := engine.Result{Request: r}
	for k := range r.K {
		traj := k
		if len(r.Stream) > 3 {
			traj = int(r.Stream[3])
		}
		toks := byteTokens(f.respond(userMessage(prompt), agent, turn, traj))
		finish := engine.FinishStop
		if len(toks) > r.MaxTokens {
			toks, finish = toks[:r.MaxTokens], engine.FinishLength
		}
		s := engine.Sample{Index: k, Tokens: toks, Finish: finish}
		for range toks {
			s.LogProbs = append(s.LogProbs, -0.25)
			s.Entropies = append(s.Entropies, 0.5)
		}
		res.Samples = append(res.Samples, s)
	}
	return res
}

var errPoison = errors.New("fake tokenizer: poisoned text")

func (f *fakeGen) Tokenize(text string) ([]int32, error) {
	f.mu.Lock()
	if f.tokenized == nil {
		f.tokenized = map[string]int{}
	}
	f.tokenized[text]++
	f.mu.Unlock()
	if f.failOn != "" && strings.Contains(text, f.failOn) {
		return nil, errPoison
	}
	return byteTokens(text), nil
}

func byteTokens(text string) []int32 {
	toks := make([]int32, len(text))
	for i := range len(text) {
		toks[i] = int32(text[i])
	}
	return toks
}

func (f *fakeGen) Detokenize(tokens []int32) (string, error) {
	b := make([]byte, len(tokens))
	for i, t := range tokens {
		b[i] = byte(t)
	}
	return string(b), nil
}

func (f *fakeGen) SeqContext() int { return 8192 }
func (f *fakeGen) Slots() int      { return 4 }

// served returns the requests the generator served, in a stable order.
func (f *fakeGen) served() []engine.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	reqs := slices.Clone(f.requests)
	slices.SortFunc(reqs, func(a, b engine.Request) int { return slices.Compare(a.Stream, b.Stream) })
	return reqs
}

// fakeConfig is a debate of len(gens) agents, agent a on gens[a].
func fakeConfig(turns, k int, gens ...*fakeGen) Config {
	cfg := Config{Turns: turns, K: k}
	for a, g := range gens {
		cfg.Agents = append(cfg.Agents, Agent{Name: fmt.Sprintf("agent %d", a), Generator: g, Format: fakeFormat,
			Params: sampler.Params{Temperature: 1, TopP: 1}, MaxTokens: 1000, Seed: 7})
	}
	return cfg
}

func fakeProblems(n int) []data.Problem {
	var ps []data.Problem
	for i := range n {
		ps = append(ps, data.Problem{Dataset: "fake", ID: fmt.Sprint(i), Question: fmt.Sprintf("What is %d+5?", i), Gold: fmt.Sprint(i + 5)})
	}
	return ps
}

// runFake debates problems and returns the records by problem index.
func runFake(t *testing.T, cfg Config, problems []data.Problem, skip func(int) bool) (map[int]Record, Stats, error) {
	t.Helper()
	recs := map[int]Record{}
	stats, err := Run(context.Background(), cfg, problems, skip, func(r Record) error {
		if _, dup := recs[r.Index]; dup {
			t.Errorf("problem %d finished twice", r.Index)
		}
		recs[r.Index] = r
		return nil
	})
	return recs, stats, err
}

// rendered is a message's prompt ids as the fake tokenizes them.
func rendered(t *testing.T, msg string) []int32 {
	t.Helper()
	text, err := fakeFormat.Render([]chat.Message{{Role: "user", Content: msg}}, chat.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return byteTokens(text)
}

// Turn 0 asks the question K times; turn t of trajectory k shows both agents the same
// message built from trajectory k's turn t-1; each request goes to its agent's generator
// with the agent's seed and the stream of its problem, agent, turn and trajectory; every
// response is graded once, with its token statistics.
func TestDebateProtocol(t *testing.T) {
	respond := func(msg string, agent, turn, traj int) string {
		return fmt.Sprintf(`agent %d turn %d trajectory %d: \boxed{%d}`, agent, turn, traj, 5+agent)
	}
	gens := []*fakeGen{{respond: respond}, {respond: respond}}
	cfg := fakeConfig(3, 2, gens...)
	problems := fakeProblems(2)
	recs, stats, err := runFake(t, cfg, problems, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 2 || stats.Problems != 2 || stats.Generations != 2*3*2*2 || stats.Carried != 0 || stats.Trimmed != 0 {
		t.Fatalf("%d records, stats %+v", len(recs), stats)
	}
	var tokens int64
	for i, p := range problems {
		r := recs[i]
		if r.Index != i || r.Problem != p || len(r.Turns) != 3 {
			t.Fatalf("record %d: index %d, problem %+v, %d turns", i, r.Index, r.Problem, len(r.Turns))
		}
		for tt, turn := range r.Turns {
			for a, byTraj := range turn {
				for k, at := range byTraj {
					where := fmt.Sprintf("problem %d turn %d agent %d trajectory %d", i, tt, a, k)
					var want string
					if tt == 0 {
						want = Turn0Message(p.Question)
					} else {
						var rounds [][]string
						for prev := range tt {
							rounds = append(rounds, []string{r.Turns[prev][0][k].Text, r.Turns[prev][1][k].Text})
						}
						want, err = cfg.Prompt.Message(p.Question, rounds, TrajectoryID{Problem: ProblemKey(p), Trajectory: uint64(k)})
						if err != nil {
							t.Fatal(err)
						}
					}
					if at.Prompt != want || !slices.Equal(at.PromptTokens, rendered(t, want)) {
						t.Errorf("%s: prompt %q, want %q", where, at.Prompt, want)
					}
					if text := respond("", a, tt, k); at.Text != text || len(at.Tokens) != len(text) || at.Finish != engine.FinishStop {
						t.Errorf("%s: text %q (%d tokens, %s), want %q", where, at.Text, len(at.Tokens), at.Finish, text)
					}
					answer := fmt.Sprint(5 + a)
					wantGrade := grade.Verdict{Key: grade.Key(answer), Strict: a == i, Robust: a == i, Boxed: true,
						Tokens: len(at.Text), MeanEntropy: 0.5, MeanNLL: 0.25}
					if at.Answer == nil || *at.Answer != answer || at.Grade != wantGrade || at.Carried || at.Trimmed {
						t.Errorf("%s: answer %v, grade %+v, want %q and %+v", where, at.Answer, at.Grade, answer, wantGrade)
					}
					tokens += int64(len(at.Tokens))
				}
			}
		}
	}
	if stats.GeneratedTokens != tokens {
		t.Errorf("stats count %d generated tokens, the records %d", stats.GeneratedTokens, tokens)
	}
	for a, g := range gens {
		var streams [][]uint64
		for _, r := range g.served() {
			k := 1 // a turn-0 request asks for all K samples, a later one continues one trajectory
			if r.Stream[2] == 0 {
				k = 2
			}
			if r.Seed != 7 || r.MaxTokens != 1000 || r.K != k {
				t.Errorf("agent %d: request %+v", a, r)
			}
			streams = append(streams, r.Stream)
		}
		var want [][]uint64
		for _, p := range problems {
			key := ProblemKey(p)
			want = append(want, []uint64{key, uint64(a), 0})
			for tt := 1; tt < 3; tt++ {
				for k := range 2 {
					want = append(want, []uint64{key, uint64(a), uint64(tt), uint64(k)})
				}
			}
		}
		slices.SortFunc(want, slices.Compare)
		if !reflect.DeepEqual(streams, want) {
			t.Errorf("agent %d's generator served streams %v, want %v", a, streams, want)
		}
	}
}

// Peers see each response with its last boxed answer, and every copy of it, masked;
// earlier different boxes stay. KeepAnswers shows them.
func TestDebateMasksAnswers(t *testing.T) {
	respond := func(msg string, agent, turn, traj int) string {
		if agent == 0 {
			return `maybe \boxed{4}; no: \boxed{5}, so \boxed{5}.`
		}
		return `surely \boxed{6}`
	}
	for _, keep := range []bool{false, true} {
		cfg := fakeConfig(2, 1, &fakeGen{respond: respond}, &fakeGen{respond: respond})
		cfg.Prompt.KeepAnswers = keep
		recs, _, err := runFake(t, cfg, fakeProblems(1), nil)
		if err != nil {
			t.Fatal(err)
		}
		shown := []string{`agent 0 response is: maybe \boxed{4}; no: <answer>, so <answer>.`, "agent 1 response is: surely <answer>"}
		if keep {
			shown = []string{`agent 0 response is: ` + respond("", 0, 0, 0), "agent 1 response is: " + respond("", 1, 0, 0)}
		}
		for a, byTraj := range recs[0].Turns[1] {
			msg := byTraj[0].Prompt
			for _, s := range shown {
				if !strings.Contains(msg, s) {
					t.Errorf("keep answers %v: agent %d's message lacks %q:\n%s", keep, a, s, msg)
				}
			}
			if !keep && (strings.Contains(msg, `\boxed{5}`) || strings.Contains(msg, `\boxed{6}`)) {
				t.Errorf("agent %d's message shows a final answer:\n%s", a, msg)
			}
		}
	}
}

// StopAgree ends a trajectory once its agents gave the same answer for that many turns in
// a row; its later turns carry the last responses without generating.
func TestDebateStopAgree(t *testing.T) {
	// Trajectory 0 agrees from turn 0, trajectory 1 from turn 1; trajectory 2 never
	// answers, which is never agreement.
	respond := func(msg string, agent, turn, traj int) string {
		switch {
		case traj == 2:
			return "no idea"
		case traj == 1 && turn == 0:
			return fmt.Sprintf(`\boxed{%d}`, 5+agent)
		}
		return `\boxed{5}`
	}
	tests := []struct {
		stopAgree int
		// generated[t][k] says whether trajectory k was generated at turn t.
		generated [4][3]bool
	}{
		{0, [4][3]bool{{true, true, true}, {true, true, true}, {true, true, true}, {true, true, true}}},
		{1, [4][3]bool{{true, true, true}, {false, true, true}, {false, false, true}, {false, false, true}}},
		{2, [4][3]bool{{true, true, true}, {true, true, true}, {false, true, true}, {false, false, true}}},
	}
	for _, tc := range tests {
		g := &fakeGen{respond: respond}
		cfg := fakeConfig(4, 3, g, g)
		cfg.StopAgree = tc.stopAgree
		recs, stats, err := runFake(t, cfg, fakeProblems(1), nil)
		if err != nil {
			t.Fatal(err)
		}
		r := recs[0]
		carried, requests := 0, 2 // turn 0: one request of K samples per agent
		for tt := range 4 {
			for k := range 3 {
				for a := range 2 {
					at := r.Turns[tt][a][k]
					if at.Carried == tc.generated[tt][k] {
						t.Errorf("stop agree %d: turn %d agent %d trajectory %d: carried %v", tc.stopAgree, tt, a, k, at.Carried)
					}
					if !at.Carried || tt == 0 {
						if tt > 0 {
							requests++
						}
						continue
					}
					carried++
					prev := r.Turns[tt-1][a][k]
					if at.Text != prev.Text || at.Grade != prev.Grade || at.Prompt != "" || at.Tokens != nil || at.PromptTokens != nil {
						t.Errorf("stop agree %d: turn %d agent %d trajectory %d does not carry turn %d: %+v", tc.stopAgree, tt, a, k, tt-1, at)
					}
				}
			}
		}
		if stats.Carried != carried || len(g.served()) != requests || stats.Generations+stats.Carried != 4*3*2 {
			t.Errorf("stop agree %d: stats %+v, %d requests served; want %d carried, %d requests",
				tc.stopAgree, stats, len(g.served()), carried, requests)
		}
	}
}

// StopEU ends a problem's whole debate once EU, computed by the function the caller
// supplies, is below the threshold at a turn.
func TestDebateStopEU(t *testing.T) {
	// The stub EU is 0 when every verdict has the same answer key and 1 otherwise.
	var calls int
	eu := func(byAgent [][]grade.Verdict) (float64, error) {
		calls++
		keys := map[string]bool{}
		for _, vs := range byAgent {
			for _, v := range vs {
				keys[v.Key] = true
			}
		}
		return float64(len(keys) - 1), nil
	}
	agreeAt := func(turn int) func(string, int, int, int) string {
		return func(msg string, agent, tt, traj int) string {
			if tt < turn {
				return fmt.Sprintf(`\boxed{%d}`, agent+traj)
			}
			return `\boxed{5}`
		}
	}
	for _, tc := range []struct {
		name    string
		agreeAt int
		carried int // responses carried: agents x K x turns stopped
	}{
		{"agreement at turn 0 stops the problem at once", 0, 2 * 2 * 2},
		{"agreement at turn 1 stops the last turn", 1, 2 * 2 * 1},
		{"no agreement, no stop", 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls = 0
			g := &fakeGen{respond: agreeAt(tc.agreeAt)}
			cfg := fakeConfig(3, 2, g, g)
			cfg.StopEU, cfg.EU = 0.5, eu
			recs, stats, err := runFake(t, cfg, fakeProblems(1), nil)
			if err != nil {
				t.Fatal(err)
			}
			if stats.Carried != tc.carried || stats.Generations != 2*2*3-tc.carried {
				t.Errorf("stats %+v, want %d carried", stats, tc.carried)
			}
			for tt := tc.agreeAt + 1; tt < 3; tt++ {
				for _, byTraj := range recs[0].Turns[tt] {
					for _, at := range byTraj {
						if !at.Carried {
							t.Errorf("turn %d was generated after EU stopped the debate", tt)
						}
					}
				}
			}
			if calls == 0 {
				t.Error("EU was never asked")
			}
		})
	}

	t.Run("an EU error stops the run", func(t *testing.T) {
		g := &fakeGen{respond: agreeAt(0)}
		cfg := fakeConfig(2, 2, g, g)
		bad := errors.New("no support")
		cfg.StopEU, cfg.EU = 0.5, func([][]grade.Verdict) (float64, error) { return 0, bad }
		if _, _, err := runFake(t, cfg, fakeProblems(1), nil); !errors.Is(err, bad) {
			t.Errorf("err = %v, want the EU's error", err)
		}
	})

	t.Run("a threshold without an EU function is rejected", func(t *testing.T) {
		g := &fakeGen{respond: agreeAt(0)}
		cfg := fakeConfig(2, 2, g, g)
		cfg.StopEU = 0.5
		if _, _, err := runFake(t, cfg, fakeProblems(1), nil); err == nil {
			t.Error("want an error")
		}
	})
}

// A debate prompt over PromptLimit trims the responses it shows from the left, keeping
// their conclusions, to the longest that fits; a problem whose turn-0 prompt is already
// over the limit is skipped.
func TestDebateTrimsPrompts(t *testing.T) {
	respond := func(msg string, agent, turn, traj int) string {
		var b strings.Builder
		for line := range 40 {
			fmt.Fprintf(&b, "agent %d step %02d. ", agent, line)
		}
		return b.String() + `so \boxed{5}.`
	}
	g := &fakeGen{respond: respond}
	cfg := fakeConfig(2, 2, g, g)
	cfg.PromptLimit = 1000
	problems := fakeProblems(2)
	problems[1].Question = strings.Repeat("Too long. ", 100)
	recs, stats, err := runFake(t, cfg, problems, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := recs[1]; ok || len(recs) != 1 || stats.SkippedOverlong != 1 || stats.Problems != 1 {
		t.Fatalf("overlong problem: %d records, stats %+v", len(recs), stats)
	}
	if stats.Trimmed != 2*2 {
		t.Errorf("%d prompts trimmed, want every turn-1 prompt (4)", stats.Trimmed)
	}
	// Trimming counts many candidate messages, and both agents (one model, one format)
	// get the same ones: each text is tokenized once.
	for text, n := range g.tokenized {
		if n > 1 {
			t.Errorf("tokenized %d times: %.80q...", n, text)
		}
	}
	if len(g.tokenized) < 6 {
		t.Errorf("%d texts tokenized; trimming two trajectories should have tried more", len(g.tokenized))
	}
	r := recs[0]
	count := func(msg string) (int, error) { return len(rendered(t, msg)), nil }
	for k := range 2 {
		rounds := [][]string{{r.Turns[0][0][k].Text, r.Turns[0][1][k].Text}}
		want, trimmed, err := cfg.Prompt.FitMessage(problems[0].Question, rounds,
			TrajectoryID{Problem: ProblemKey(problems[0]), Trajectory: uint64(k)}, count, cfg.PromptLimit)
		if err != nil || !trimmed {
			t.Fatalf("FitMessage: trimmed %v, %v", trimmed, err)
		}
		for a := range 2 {
			at := r.Turns[1][a][k]
			if !at.Trimmed || at.Prompt != want || len(at.PromptTokens) > cfg.PromptLimit || len(at.PromptTokens) < cfg.PromptLimit-40 {
				t.Errorf("agent %d trajectory %d: trimmed %v, %d prompt tokens (limit %d), message as FitMessage's: %v",
					a, k, at.Trimmed, len(at.PromptTokens), cfg.PromptLimit, at.Prompt == want)
			}
			for peer := range 2 {
				if head, tail := fmt.Sprintf("agent %d step 00.", peer), fmt.Sprintf("agent %d step 39. so <answer>.", peer); strings.Contains(at.Prompt, head) || !strings.Contains(at.Prompt, tail) {
					t.Errorf("agent %d trajectory %d: agent %d's response is not cut from the left:\n%s", a, k, peer, at.Prompt)
				}
			}
		}
	}
}

// A run cut after some problems and resumed with skip for those gives the same records
// as an uninterrupted run, under either protocol.
func TestDebateResume(t *testing.T) {
	for _, protocol := range Protocols {
		t.Run(string(protocol), func(t *testing.T) { testDebateResume(t, protocol) })
	}
}

func testDebateResume(t *testing.T, protocol Protocol) {
	respond := func(msg string, agent, turn, traj int) string {
		// Depends on the prompt, so a turn depends on the turns before it.
		return fmt.Sprintf(`%d bytes seen; \boxed{%d}`, len(msg), (len(msg)+agent+traj)%3+5)
	}
	g := &fakeGen{respond: respond}
	cfg := fakeConfig(3, 2, g, g)
	cfg.StopAgree, cfg.InFlight, cfg.Protocol = 1, 2, protocol
	problems := fakeProblems(6)
	full, _, err := runFake(t, cfg, problems, nil)
	if err != nil || len(full) != 6 {
		t.Fatalf("full run: %d records, %v", len(full), err)
	}

	cut := errors.New("cut")
	first := map[int]Record{}
	_, err = Run(context.Background(), cfg, problems, nil, func(r Record) error {
		first[r.Index] = r
		if len(first) == 2 {
			return cut
		}
		return nil
	})
	if !errors.Is(err, cut) || len(first) != 2 {
		t.Fatalf("cut run: %d records, err %v", len(first), err)
	}
	rest, _, err := runFake(t, cfg, problems, func(i int) bool { _, ok := first[i]; return ok })
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range rest {
		if _, ok := first[i]; ok {
			t.Errorf("problem %d debated again after resuming", i)
		}
		first[i] = r
	}
	if !reflect.DeepEqual(first, full) {
		t.Error("the cut and resumed run's records differ from the uninterrupted run's")
	}
}

// Failures of the generator come back as errors: a prompt that cannot be tokenized (no
// sentinel length) and a generator that stops serving.
func TestDebateErrors(t *testing.T) {
	t.Run("tokenizing a debate prompt fails", func(t *testing.T) {
		g := &fakeGen{failOn: "POISON", respond: func(string, int, int, int) string { return `POISON \boxed{1}` }}
		if _, _, err := runFake(t, fakeConfig(2, 1, g, g), fakeProblems(1), nil); !errors.Is(err, errPoison) {
			t.Errorf("err = %v, want the tokenizer's", err)
		}
	})
	for _, c := range []struct {
		protocol Protocol
		k        int
		want     string
	}{
		{Probe, 1, "K must be at least 2"},
		{"paths", 2, `unknown protocol "paths"; the protocols are [trajectories probe]`},
	} {
		cfg := fakeConfig(2, c.k, &fakeGen{respond: func(string, int, int, int) string { return "" }})
		cfg.Protocol = c.protocol
		if _, _, err := runFake(t, cfg, fakeProblems(1), nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("protocol %q, K %d: err = %v, want %q", c.protocol, c.k, err, c.want)
		}
	}
	t.Run("a generator stops early", func(t *testing.T) {
		cfg := fakeConfig(2, 1, &fakeGen{respond: func(string, int, int, int) string { return "" }})
		cfg.Agents = append(cfg.Agents, cfg.Agents[0])
		cfg.Agents[1].Generator = &stoppedGen{}
		if _, _, err := runFake(t, cfg, fakeProblems(1), nil); err == nil || !strings.Contains(err.Error(), "stopped early") {
			t.Errorf("err = %v, want a generator that stopped early", err)
		}
	})
}

// stoppedGen returns from Serve at once, as a generator that lost its device would.
type stoppedGen struct{ fakeGen }

func (*stoppedGen) Serve(context.Context, *engine.Queue, func(engine.Result)) error { return nil }

// The rollout files' JSON of a turn, grade object included, is a file format: its keys
// and their order must not change.
func TestAgentTurnJSON(t *testing.T) {
	ans := "5"
	at := AgentTurn{Prompt: "q", PromptTokens: []int32{1}, Text: `\boxed{5}`, Tokens: []int32{2, 3},
		LogProbs: []float32{-0.5, -1}, Entropies: []float32{1, 0.5}, Finish: engine.FinishLength, Answer: &ans,
		Grade: grade.Verdict{Key: "5", Strict: true, Robust: true, Tokens: 2, Truncated: true, Boxed: true,
			MeanEntropy: 0.75, MeanNLL: 0.75}}
	want := `{"prompt":"q","prompt_tokens":[1],"text":"\\boxed{5}","tokens":[2,3],"logprobs":[-0.5,-1],` +
		`"entropies":[1,0.5],"finish":"length","answer":"5","grade":{"key":"5","strict":true,"robust":true,` +
		`"tokens":2,"truncated":true,"boxed":true,"mean_entropy":0.75,"mean_nll":0.75}}`
	got, err := json.Marshal(at)
	if err != nil || string(got) != want {
		t.Errorf("AgentTurn JSON:\n got %s (%v)\nwant %s", got, err, want)
	}
	none, _ := json.Marshal(grade.Verdict{NoAnswer: true})
	if want := `{"no_answer":true,"strict":false,"robust":false,"tokens":0,"mean_entropy":0,"mean_nll":0}`; string(none) != want {
		t.Errorf("no-answer grade JSON:\n got %s\nwant %s", none, want)
	}
}

// A deterministic debate (on the step clock) gives the records of a free-running one, and
// a generator that stops early still ends it with an error.
func TestSteppedDebate(t *testing.T) {
	respond := func(msg string, agent, turn, traj int) string {
		return fmt.Sprintf(`agent %d turn %d trajectory %d: \boxed{%d}`, agent, turn, traj, 5+agent+turn%2)
	}
	var runs []map[int]Record
	for _, det := range []bool{false, true} {
		g := &fakeGen{respond: respond}
		cfg := fakeConfig(3, 2, g, &fakeGen{respond: respond}, g)
		cfg.Deterministic, cfg.StopAgree, cfg.InFlight = det, 1, 2
		recs, stats, err := runFake(t, cfg, fakeProblems(5), func(i int) bool { return i == 1 })
		if err != nil || stats.Problems != 4 {
			t.Fatalf("deterministic=%v: %d problems, %v", det, stats.Problems, err)
		}
		runs = append(runs, recs)
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		t.Error("the stepped debate's records differ from the free-running one's")
	}
	cfg := fakeConfig(2, 1, &fakeGen{respond: func(string, int, int, int) string { return "" }})
	cfg.Agents = append(cfg.Agents, cfg.Agents[0])
	cfg.Agents[1].Generator = &stoppedGen{}
	cfg.Deterministic = true
	if _, _, err := runFake(t, cfg, fakeProblems(1), nil); err == nil || !strings.Contains(err.Error(), "stopped early") {
		t.Errorf("err = %v, want a generator that stopped early", err)
	}
}

// The probe protocol (the paper's Algorithm 1): at every turn each agent gets one request
// of K probes and one of a continuation, with the identical prompt; the probes are the
// record's Turns (and so its verdicts), the continuations alone build the next turn's
// message; a greedy continuation asks for temperature 0. The step clock gives the same
// records, and agreement of the continuations stops the debate.
func TestDebateProbe(t *testing.T) {
	const K = 3
	respond := func(msg string, agent, turn, sample int) string {
		// Depends on the prompt, so a turn depends on the continuations before it.
		return fmt.Sprintf(`agent %d turn %d sample %d saw %d bytes: \boxed{%d}`, agent, turn, sample, len(msg), 5+(agent+sample)%2)
	}
	var runs []map[int]Record
	for _, det := range []bool{false, true} {
		gens := []*fakeGen{{respond: respond}, {respond: respond}}
		cfg := fakeConfig(3, K, gens...)
		cfg.Protocol, cfg.GreedyContinuation, cfg.Deterministic = Probe, true, det
		problems := fakeProblems(2)
		recs, stats, err := runFake(t, cfg, problems, nil)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 2 || stats.Generations != 2*3*2*(K+1) {
			t.Fatalf("%d records, stats %+v", len(recs), stats)
		}
		for i, p := range problems {
			r := recs[i]
			if len(r.Turns) != 3 || len(r.Continuations) != 3 {
				t.Fatalf("problem %d: %d turns, %d continuations", i, len(r.Turns), len(r.Continuations))
			}
			var rounds [][]string
			for tt := range 3 {
				want := Turn0Message(p.Question)
				if tt > 0 {
					if want, err = cfg.Prompt.Message(p.Question, rounds, TrajectoryID{Problem: ProblemKey(p)}); err != nil {
						t.Fatal(err)
					}
				}
				var round []string
				for a := range 2 {
					c := r.Continuations[tt][a]
					if c.Prompt != want || c.Text != respond(want, a, tt, K) {
						t.Errorf("problem %d turn %d agent %d: continuation %q after %q", i, tt, a, c.Text, c.Prompt)
					}
					round = append(round, c.Text)
					for k, at := range r.Turns[tt][a] {
						if at.Prompt != want || at.Text != respond(want, a, tt, k) || at.Answer == nil {
							t.Errorf("problem %d turn %d agent %d probe %d: %q after %q", i, tt, a, k, at.Text, at.Prompt)
						}
					}
				}
				rounds = append(rounds, round)
			}
			if v := r.Verdicts(); len(v) != 2 || len(v[0]) != 3 || len(v[0][2]) != K {
				t.Errorf("problem %d: verdicts of shape %d x %d x %d, want 2 x 3 x %d", i, len(v), len(v[0]), len(v[0][2]), K)
			}
		}
		for a, g := range gens {
			reqs := g.served()
			if len(reqs) != 2*3*2 {
				t.Fatalf("agent %d: %d requests, want a probe and a continuation request per problem and turn", a, len(reqs))
			}
			for j := 0; j < len(reqs); j += 2 {
				probes, cont := reqs[j], reqs[j+1]
				if probes.K != K || cont.K != 1 || len(probes.Stream) != 3 || !slices.Equal(cont.Stream, append(slices.Clone(probes.Stream), K)) ||
					!slices.Equal(probes.Prompt, cont.Prompt) || probes.Params.Temperature != 1 || cont.Params.Temperature != 0 {
					t.Errorf("agent %d: probes %+v and continuation %+v", a, probes, cont)
				}
			}
		}
		runs = append(runs, recs)
	}
	if !reflect.DeepEqual(runs[0], runs[1]) {
		t.Error("the stepped probe debate's records differ from the free-running one's")
	}

	// Continuations that agree stop the debate; probes and continuations are carried.
	agree := func(msg string, agent, turn, sample int) string {
		if sample == K {
			return `\boxed{7}`
		}
		return fmt.Sprintf(`\boxed{%d}`, agent+sample)
	}
	cfg := fakeConfig(3, K, &fakeGen{respond: agree}, &fakeGen{respond: agree})
	cfg.Protocol, cfg.StopAgree = Probe, 1
	recs, stats, err := runFake(t, cfg, fakeProblems(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Generations != 2*(K+1) || stats.Carried != 2*2*(K+1) {
		t.Errorf("stopping on agreement: stats %+v, want one turn generated and two carried", stats)
	}
	r := recs[0]
	for tt := 1; tt < 3; tt++ {
		if c := r.Continuations[tt][1]; !c.Carried || c.Text != `\boxed{7}` || !r.Turns[tt][0][K-1].Carried {
			t.Errorf("turn %d: continuation %+v not carried", tt, c)
		}
	}
}
