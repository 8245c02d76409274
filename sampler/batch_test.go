package sampler

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

type batchInput struct {
	rows   [][]float32
	params []Params
	seeds  []Stream
}

func newBatchInput(n, vocab int) batchInput {
	r := rand.New(rand.NewPCG(71, 72))
	in := batchInput{}
	ps := []Params{
		{Temperature: 0.6, TopP: 0.95},
		{Temperature: 1, TopK: 20, TopP: 0.9, MinP: 0.05},
		{Temperature: 0, TopP: 1},
		{Temperature: 1.2, TopP: 1},
	}
	for i := range n {
		in.rows = append(in.rows, lmLikeRow(r, vocab))
		in.params = append(in.params, ps[i%len(ps)])
		in.seeds = append(in.seeds, NewStream(9, 100, uint64(i)))
	}
	return in
}

// run samples steps tokens per row through b, with rows taken in the order
// perm, and returns the draws by original row index.
func (in batchInput) run(t *testing.T, b *Batch, perm []int, steps int) [][]Draw {
	t.Helper()
	n := len(in.rows)
	streams := make([]Stream, n)
	rows, params, rngs := make([][]float32, n), make([]Params, n), make([]*Stream, n)
	for j, i := range perm {
		streams[j] = in.seeds[i]
		rows[j], params[j], rngs[j] = in.rows[i], in.params[i], &streams[j]
	}
	got := make([][]Draw, n)
	out := make([]Draw, n)
	for range steps {
		if err := b.Sample(rows, params, rngs, out); err != nil {
			t.Fatal(err)
		}
		for j, i := range perm {
			got[i] = append(got[i], out[j])
		}
	}
	return got
}

// TestBatchDeterminism: the draws of a row depend only on its logits,
// parameters and stream: not on the worker count, the row order, or whether
// it went through Batch or Sample.
func TestBatchDeterminism(t *testing.T) {
	in := newBatchInput(23, 3000)
	identity := make([]int, len(in.rows))
	for i := range identity {
		identity[i] = i
	}
	// Sequential Sample calls are the reference.
	want := make([][]Draw, len(in.rows))
	for i := range in.rows {
		rng := in.seeds[i]
		for range 5 {
			d, err := Sample(in.rows[i], in.params[i], &rng)
			if err != nil {
				t.Fatal(err)
			}
			want[i] = append(want[i], d)
		}
	}
	r := rand.New(rand.NewPCG(73, 74))
	for _, workers := range []int{1, 2, 3, 8} {
		for _, order := range []string{"identity", "shuffled"} {
			perm := identity
			if order == "shuffled" {
				perm = r.Perm(len(in.rows))
			}
			b := NewBatch(workers)
			got := in.run(t, b, perm, 5)
			b.Close()
			for i := range want {
				for step := range want[i] {
					if got[i][step] != want[i][step] {
						t.Fatalf("workers=%d %s: row %d step %d = %+v, want %+v", workers, order, i, step, got[i][step], want[i][step])
					}
				}
			}
		}
	}
}

// TestKSamplesDiffer: K streams of one (seed, request) that differ only in
// the sample index give different tokens on a high-entropy row, and one
// stream gives different tokens from step to step.
func TestKSamplesDiffer(t *testing.T) {
	row := gaussianRow(rand.New(rand.NewPCG(75, 76)), qwenVocab, 1)
	p := Params{Temperature: 1, TopP: 1}
	const k = 16
	seen := map[int32]bool{}
	for i := range uint64(k) {
		rng := NewStream(1234, 5, i)
		d, err := Sample(row, p, &rng)
		if err != nil {
			t.Fatal(err)
		}
		seen[d.Token] = true
	}
	// The row's entropy is about 11.4 nats: 16 draws almost never collide.
	if len(seen) < k-1 {
		t.Fatalf("%d samples of one prompt gave only %d distinct tokens", k, len(seen))
	}
	rng := NewStream(1234, 5, 0)
	steps := map[int32]bool{}
	for range k {
		d, _ := Sample(row, p, &rng)
		steps[d.Token] = true
	}
	if len(steps) < k-1 {
		t.Fatalf("%d steps of one stream gave only %d distinct tokens", k, len(steps))
	}
}

func TestBatchErrors(t *testing.T) {
	in := newBatchInput(6, 500)
	b := NewBatch(3)
	defer b.Close()
	streams := make([]Stream, 6)
	rngs := make([]*Stream, 6)
	for i := range rngs {
		streams[i] = in.seeds[i]
		rngs[i] = &streams[i]
	}
	out := make([]Draw, 6)

	if err := b.Sample(in.rows, in.params[:5], rngs, out); err == nil || !strings.Contains(err.Error(), "equal lengths") {
		t.Fatalf("mismatched lengths: err = %v", err)
	}

	// Rows 2 and 4 are bad; the others must still be sampled correctly.
	rows := append([][]float32(nil), in.rows...)
	rows[2] = []float32{1, float32(math.NaN())}
	params := append([]Params(nil), in.params...)
	params[4].TopP = 0
	err := b.Sample(rows, params, rngs, out)
	if !errors.Is(err, ErrLogits) || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), "2 rows failed") {
		t.Fatalf("err = %v, want row 2's ErrLogits and a count of 2", err)
	}
	for i := range rows {
		if i == 2 || i == 4 {
			continue
		}
		rng := in.seeds[i]
		want, err := Sample(rows[i], params[i], &rng)
		if err != nil || out[i] != want || streams[i] != rng {
			t.Fatalf("row %d: %+v (err %v), want %+v", i, out[i], err, want)
		}
	}

	b.Close()
	b.Close() // idempotent
	if err := b.Sample(in.rows, in.params, rngs, out); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("after Close: err = %v", err)
	}
}

// TestNoSteadyStateAllocations: once buffers have grown, neither Batch.Sample
// nor Sample allocates.
func TestNoSteadyStateAllocations(t *testing.T) {
	in := newBatchInput(8, 20000)
	streams := make([]Stream, len(in.rows))
	rngs := make([]*Stream, len(in.rows))
	for i := range rngs {
		streams[i] = in.seeds[i]
		rngs[i] = &streams[i]
	}
	out := make([]Draw, len(in.rows))
	b := NewBatch(2)
	defer b.Close()
	if allocs := testing.AllocsPerRun(20, func() {
		if err := b.Sample(in.rows, in.params, rngs, out); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Batch.Sample allocates %v times per call", allocs)
	}
	if raceEnabled {
		return // see raceEnabled
	}
	if allocs := testing.AllocsPerRun(20, func() {
		if _, err := Sample(in.rows[0], in.params[0], rngs[0]); err != nil {
			t.Fatal(err)
		}
	}); allocs != 0 {
		t.Errorf("Sample allocates %v times per call", allocs)
	}
}
