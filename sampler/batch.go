package sampler

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
)

// Batch samples many rows at once on a fixed pool of workers. Each worker
// owns its scratch memory, so a call allocates nothing once the buffers have
// grown to the vocabulary size. Rows are independent: results do not depend
// on the worker count or on which worker takes which row.
//
// Calls are serialised; use one Batch per engine loop.
type Batch struct {
	mu      sync.Mutex
	closed  bool
	start   []chan struct{} // one per helper goroutine; the caller is worker 0
	running sync.WaitGroup  // helpers busy with the current call
	exited  sync.WaitGroup  // helpers not yet returned after Close
	scratch []scratch

	// the current call, read by the workers
	rows   [][]float32
	params []Params
	rngs   []*Stream
	out    []Draw
	errs   []error
	next   atomic.Int64
}

// NewBatch starts a pool of workers goroutines (the calling goroutine counts
// as one). workers <= 0 means GOMAXPROCS.
func NewBatch(workers int) *Batch {
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	b := &Batch{
		start:   make([]chan struct{}, workers-1),
		scratch: make([]scratch, workers),
	}
	b.exited.Add(len(b.start))
	for w := range b.start {
		b.start[w] = make(chan struct{})
		go b.helper(w+1, b.start[w])
	}
	return b
}

func (b *Batch) helper(w int, start <-chan struct{}) {
	defer b.exited.Done()
	for range start {
		b.work(w)
		b.running.Done()
	}
}

// work takes rows until none is left.
func (b *Batch) work(w int) {
	s := &b.scratch[w]
	for {
		i := int(b.next.Add(1) - 1)
		if i >= len(b.rows) {
			return
		}
		d, err := s.sample(b.rows[i], b.params[i], b.rngs[i])
		b.out[i] = d
		if err != nil {
			b.errs[i] = fmt.Errorf("row %d: %w", i, err)
		}
	}
}

// minLogitsPerWorker is the least work (logits to scan) that wakes another worker.
const minLogitsPerWorker = 1 << 16

// Sample draws one token per row: rows[i] with params[i] and rngs[i] gives
// out[i]. All slices must have the same length. A row that fails (bad
// parameters, NaN or +Inf logits) leaves the other rows' results valid; the
// returned error names the lowest failing row and how many failed.
func (b *Batch) Sample(rows [][]float32, params []Params, rngs []*Stream, out []Draw) error {
	n := len(rows)
	if len(params) != n || len(rngs) != n || len(out) != n {
		return fmt.Errorf("batch sample: %d rows, %d params, %d streams, %d outputs: want equal lengths",
			n, len(params), len(rngs), len(out))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("batch sample: batch is closed")
	}
	if cap(b.errs) < n {
		b.errs = make([]error, n)
	}
	b.errs = b.errs[:n]
	clear(b.errs)
	b.rows, b.params, b.rngs, b.out = rows, params, rngs, out
	b.next.Store(0)
	// Waking a helper costs microseconds; give each one enough logits to be worth it.
	var work int
	for _, r := range rows {
		work += len(r)
	}
	helpers := min(len(b.start), work/minLogitsPerWorker, n-1)
	b.running.Add(helpers)
	for _, c := range b.start[:helpers] {
		c <- struct{}{}
	}
	b.work(0)
	b.running.Wait()
	b.rows, b.params, b.rngs, b.out = nil, nil, nil, nil // do not pin the caller's memory

	var first error
	failed := 0
	for _, err := range b.errs {
		if err != nil {
			if first == nil {
				first = err
			}
			failed++
		}
	}
	clear(b.errs)
	if failed > 1 {
		return fmt.Errorf("batch sample: %w (%d rows failed)", first, failed)
	}
	if first != nil {
		return fmt.Errorf("batch sample: %w", first)
	}
	return nil
}

// Close stops the workers. It is safe to call more than once; Sample after
// Close returns an error.
func (b *Batch) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.closed = true
	for _, c := range b.start {
		close(c)
	}
	b.exited.Wait()
}
