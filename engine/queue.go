package engine

import (
	"context"
	"sync"
)

// Queue is an unbounded, goroutine-safe queue of requests feeding a generator's Serve
// (Engine.Serve, or a generator outside this package: a test's fake). Its producer pushes,
// closes and, on a stepped queue, ticks; its generator pops, waits and ends each step.
type Queue struct {
	mu     sync.Mutex
	items  []*Request
	closed bool
	notify chan struct{} // has a value while items may be waiting or the queue just closed
	step   *stepClock    // nil: the generator steps as fast as it can
}

// stepClock makes a generator step only when its debate says so: it waits for a tick
// before each step (taking requests, then decoding once) and answers with a tock after
// it. What it takes and decodes together is then a function of the debate's state, not
// of when other goroutines pushed requests.
type stepClock struct {
	tick, tock chan struct{}
	shut       chan struct{} // closed with the queue: steps run freely to drain it
}

// NewQueue makes an empty, open queue.
func NewQueue() *Queue { return &Queue{notify: make(chan struct{}, 1)} }

// NewSteppedQueue makes a queue whose generator steps only on its clock's ticks (Tick).
func NewSteppedQueue() *Queue {
	q := NewQueue()
	q.step = &stepClock{tick: make(chan struct{}, 1), tock: make(chan struct{}, 1), shut: make(chan struct{})}
	return q
}

// Tick lets a stepped queue's generator take one step: take requests, then decode once.
func (q *Queue) Tick() { q.step.tick <- struct{}{} }

// Tock has a value once the generator ended the step Tick began (EndStep).
func (q *Queue) Tock() <-chan struct{} { return q.step.tock }

// Stepped says whether the generator steps on a clock (it must not wait for requests then).
func (q *Queue) Stepped() bool { return q.step != nil }

// AwaitStep waits for the clock's tick (at once without a clock, or once closed).
func (q *Queue) AwaitStep(ctx context.Context) error {
	if q.step == nil {
		return nil
	}
	select {
	case <-q.step.tick:
		return nil
	case <-q.step.shut:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// EndStep answers the tick: the step's results are emitted.
func (q *Queue) EndStep() {
	if q.step != nil {
		select {
		case q.step.tock <- struct{}{}:
		default: // closed and draining: nobody waits
		}
	}
}

// Push appends requests (copied); pushing to a closed queue panics, as sending on a
// closed channel does.
func (q *Queue) Push(reqs ...Request) {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		panic("engine: push to a closed queue")
	}
	for i := range reqs {
		r := reqs[i]
		q.items = append(q.items, &r)
	}
	q.mu.Unlock()
	wake(q)
}

// Close says no more requests will come; Serve returns once the queue is drained.
func (q *Queue) Close() {
	q.mu.Lock()
	if !q.closed && q.step != nil {
		close(q.step.shut)
	}
	q.closed = true
	q.mu.Unlock()
	wake(q)
}

// Len is the number of requests waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// wake tells an idle generator (Ready) to look again; a function, not a method, so that
// Queue's methods are all a generator's or a producer's (archtest TestEngineQueueIsOpen).
func wake(q *Queue) {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// Pop takes the oldest request waiting; false when none is.
func (q *Queue) Pop() (*Request, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items) == 0 {
		return nil, false
	}
	r := q.items[0]
	q.items[0] = nil
	q.items = q.items[1:]
	return r, true
}

// Drained is true once the queue is closed and empty: the generator is done.
func (q *Queue) Drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed && len(q.items) == 0
}

// Ready has a value when requests may have come (or the queue closed) since the generator
// last looked: what an idle generator waits on.
func (q *Queue) Ready() <-chan struct{} { return q.notify }
