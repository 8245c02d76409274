package engine_test

import (
	"slices"
	"testing"

	"github.com/umad-dev/umad/engine"
	"github.com/umad-dev/umad/sampler"
)

// Tests of sharing the common prefix of different prompts (the template and question that
// every debate prompt of a problem starts with).

// alone runs each request on an engine of its own with one slot: nothing is shared.
func alone(t *testing.T, m *engine.Model, reqs []engine.Request) map[uint64]engine.Result {
	t.Helper()
	out := map[uint64]engine.Result{}
	for _, r := range reqs {
		res, _ := run(t, m, exact(1), []engine.Request{r})
		out[r.ID] = res[r.ID]
	}
	return out
}

// prefixed returns a shared prefix of at least 40 tokens (above the engine's minimum of
// 32) and prompts that continue it with the given texts, differing from their first token on.
func prefixed(t *testing.T, m *engine.Model, texts ...string) (pre []int32, prompts [][]int32) {
	t.Helper()
	pre = prompt(t, m, "Given the following problem: a train leaves the station at noon and travels at sixty miles per hour.")
	if len(pre) < 40 {
		t.Fatalf("shared prefix of %d tokens, want at least 40", len(pre))
	}
	var firsts []int32
	for _, s := range texts {
		suffix := prompt(t, m, s)
		if slices.Contains(firsts, suffix[0]) {
			t.Fatalf("suffix %q starts with the token of another", s)
		}
		firsts = append(firsts, suffix[0])
		prompts = append(prompts, append(slices.Clone(pre), suffix...))
	}
	return pre, prompts
}

var anyToken = sampler.Params{Temperature: 1, TopP: 1}

// Two prompts sharing a long prefix: the prefix is decoded once, each suffix once, and
// the samples are those of separate engines. A request's second sample waits for the
// first, which waits for the other request's prefill (more slots than samples).
func TestCommonPrefixDecodedOnce(t *testing.T) {
	m := load(t, "qwen2")
	pre, ps := prefixed(t, m, "How far by three?", "Answer in kilometres, showing the reasoning.")
	a, b := ps[0], ps[1]
	reqs := []engine.Request{
		{ID: 1, Prompt: a, K: 1, MaxTokens: 5, Params: anyToken, Seed: 3, IgnoreEOG: true},
		{ID: 2, Prompt: b, K: 2, MaxTokens: 5, Params: anyToken, Seed: 4, IgnoreEOG: true},
	}
	got, e := run(t, m, exact(6), reqs)
	sameSamples(t, alone(t, m, reqs), got)
	st := e.Stats()
	if want := int64(len(a) + len(b) - len(pre)); st.PromptTokens != want {
		t.Errorf("%d prompt tokens decoded, want %d (the prefix once, each suffix once)", st.PromptTokens, want)
	}
	if want := int64(len(a) + 2*len(b)); st.NaivePromptTokens != want {
		t.Errorf("%d naive prompt tokens, want %d", st.NaivePromptTokens, want)
	}
	// Besides the prompts, every generated token but each sample's last.
	if got, want := e.TokensDecoded(), st.PromptTokens+3*4; got != want {
		t.Errorf("%d tokens sent to llama.cpp, want %d", got, want)
	}
	// Positions: the prefix's once, each suffix's; a sample of n prompt tokens draws its 5
	// tokens from the rows at n-1 ... n+3; naively, every prompt from 0.
	span := func(lo, hi int) int64 { return int64(hi*(hi-1)/2 - lo*(lo-1)/2) } // lo + ... + hi-1
	if want := span(0, len(pre)) + span(len(pre), len(a)) + span(len(pre), len(b)); st.PromptPositions != want {
		t.Errorf("prompt positions sum to %d, want %d", st.PromptPositions, want)
	}
	if want := span(0, len(a)) + 2*span(0, len(b)); st.NaivePromptPositions != want {
		t.Errorf("naive prompt positions sum to %d, want %d", st.NaivePromptPositions, want)
	}
	if want := span(len(a)-1, len(a)+4) + 2*span(len(b)-1, len(b)+4); st.GeneratedPositions != want {
		t.Errorf("generated positions sum to %d, want %d", st.GeneratedPositions, want)
	}

	// A common prefix below the minimum is decoded by each prompt.
	short := []engine.Request{
		{ID: 1, Prompt: append(slices.Clone(pre[:20]), a[len(pre):]...), K: 1, MaxTokens: 2, Params: anyToken, Seed: 3},
		{ID: 2, Prompt: append(slices.Clone(pre[:20]), b[len(pre):]...), K: 1, MaxTokens: 2, Params: anyToken, Seed: 3},
	}
	_, e = run(t, m, exact(2), short)
	if got, want := e.Stats().PromptTokens, int64(len(short[0].Prompt)+len(short[1].Prompt)); got != want {
		t.Errorf("20 shared tokens: %d prompt tokens decoded, want %d (no sharing)", got, want)
	}
}

// With a batch smaller than the prompts, the second request copies the prefix as soon as
// the first request's prefill holds it, while that prefill goes on.
func TestPrefixFromPartialPrefill(t *testing.T) {
	m := load(t, "llama")
	pre, ps := prefixed(t, m, "How far has it gone by three in the afternoon, and by five, in miles and in kilometres?",
		"Answer with a number.")
	opt := exact(2)
	opt.BatchSize = 16
	reqs := []engine.Request{
		{ID: 1, Prompt: ps[0], K: 1, MaxTokens: 4, Params: anyToken, Seed: 5, IgnoreEOG: true},
		{ID: 2, Prompt: ps[1], K: 1, MaxTokens: 4, Params: anyToken, Seed: 6, IgnoreEOG: true},
	}
	got, e := run(t, m, opt, reqs)
	sameSamples(t, alone(t, m, reqs), got)
	if got, want := e.Stats().PromptTokens, int64(len(ps[0])+len(ps[1])-len(pre)); got != want {
		t.Errorf("%d prompt tokens decoded, want %d", got, want)
	}
}

// The source of a prefix retires in the very step the prefix is copied from it (the copy
// runs at the next decode, after the source's cells were freed), and the copy then moves
// down into the freed slot.
func TestPrefixSourceRetires(t *testing.T) {
	m := load(t, "qwen3")
	pre, ps := prefixed(t, m, "Once.", "Twice, and more.")
	reqs := []engine.Request{
		{ID: 1, Prompt: ps[0], K: 1, MaxTokens: 1, Params: anyToken, Seed: 7, IgnoreEOG: true},
		{ID: 2, Prompt: ps[1], K: 1, MaxTokens: 6, Params: anyToken, Seed: 7, IgnoreEOG: true},
	}
	got, e := run(t, m, exact(2), reqs)
	sameSamples(t, alone(t, m, reqs), got)
	st := e.Stats()
	if want := int64(len(ps[0]) + len(ps[1]) - len(pre)); st.PromptTokens != want {
		t.Errorf("%d prompt tokens decoded, want %d", st.PromptTokens, want)
	}
	if st.Moves != 1 {
		t.Errorf("%d moves, want 1 (the prefill slot into the freed one)", st.Moves)
	}
}

// More requests than slots: each new request takes the prefix from the long-running
// first one while it generates.
func TestPrefixFromGeneratingSlot(t *testing.T) {
	m := load(t, "qwen2")
	pre, ps := prefixed(t, m, "Alpha.", "Bravo, two.", "Charlie, three.", "Delta, four.")
	var reqs []engine.Request
	want := int64(len(pre))
	for i, p := range ps {
		n := 2
		if i == 0 {
			n = 8
		}
		reqs = append(reqs, engine.Request{ID: uint64(i + 1), Prompt: p, K: 1, MaxTokens: n, Params: anyToken, Seed: 9, IgnoreEOG: true})
		want += int64(len(p) - len(pre))
	}
	got, e := run(t, m, exact(2), reqs)
	sameSamples(t, alone(t, m, reqs), got)
	if st := e.Stats(); st.PromptTokens != want {
		t.Errorf("%d prompt tokens decoded, want %d (the prefix once, each suffix once)", st.PromptTokens, want)
	}
}
