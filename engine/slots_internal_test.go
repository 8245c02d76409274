package engine

import (
	"testing"

	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/sampler"
)

// A slot waiting for a prefix of another job's prompt copies it in the step that prefill
// reaches it, not when the whole prompt is done.
func TestWaiterTakesPrefixMidPrefill(t *testing.T) {
	m, err := LoadModel(testmodel.GGUF(t, "qwen2"), ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := New(m, Options{Slots: 2, SeqContext: 256, BatchSize: 16, KVType: KVF32, FlashAttn: FlashOff})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	const shared = 40
	a, b := make([]int32, shared+40), make([]int32, shared+5)
	for i := range a {
		a[i] = int32(100 + i%50)
	}
	copy(b, a[:shared])
	for i := shared; i < len(b); i++ {
		b[i] = int32(200 + i)
	}
	q := NewQueue()
	q.Push(Request{ID: 1, Prompt: a, K: 1, MaxTokens: 2, Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: 1},
		Request{ID: 2, Prompt: b, K: 1, MaxTokens: 2, Params: sampler.Params{Temperature: 1, TopP: 1}, Seed: 1})
	q.Close()
	emitted := 0
	emit := func(r Result) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		emitted++
	}
	for s := range 2 {
		if err := e.start(e.take(q, emit), s); err != nil {
			t.Fatal(err)
		}
	}
	if w := e.slots[1]; w.state != waiting || w.want != shared {
		t.Fatalf("second slot: state %d wanting %d tokens, want waiting for %d", w.state, w.want, shared)
	}
	// 16 prompt tokens a step: the prefill holds the prefix after the third.
	for step := 1; step <= 3; step++ {
		if err := e.step(emit); err != nil {
			t.Fatal(err)
		}
		if w := e.slots[1]; (step < 3) != (w.state == waiting) {
			t.Fatalf("after step %d the second slot is in state %d", step, w.state)
		}
	}
	if src, w := e.slots[0], e.slots[1]; src.state != prefill || src.job.prefillN != 48 || w.state != prefill || w.job.prefillN != shared {
		t.Fatalf("after step 3: source state %d at %d tokens, copy state %d at %d", src.state, src.job.prefillN, w.state, w.job.prefillN)
	}
	for e.anyBusy() {
		if err := e.step(emit); err != nil {
			t.Fatal(err)
		}
	}
	if emitted != 2 || e.stats.PromptTokens != int64(len(a)+len(b)-shared) {
		t.Errorf("%d results, %d prompt tokens decoded; want 2 and %d", emitted, e.stats.PromptTokens, len(a)+len(b)-shared)
	}
}
