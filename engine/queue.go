package engine

import (
	"context"
	"sync"
)

// Queue is an unbounded, goroutine-safe queue of requests feeding Engine.Serve.
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

// newSteppedQueue makes a queue whose generator steps on its clock's ticks.
func newSteppedQueue() *Queue {
	q := NewQueue()
	q.step = &stepClock{tick: make(chan struct{}, 1), tock: make(chan struct{}, 1), shut: make(chan struct{})}
	return q
}

// stepped says whether the generator steps on a clock (it must not wait for requests then).
func (q *Queue) stepped() bool { return q.step != nil }

// awaitStep waits for the clock's tick (at once without a clock, or once closed).
func (q *Queue) awaitStep(ctx context.Context) error {
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

// stepDone answers the tick: the step's results are emitted.
func (q *Queue) stepDone() {
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
	q.wake()
}

// Close says no more requests will come; Serve returns once the queue is drained.
func (q *Queue) Close() {
	q.mu.Lock()
	if !q.closed && q.step != nil {
		close(q.step.shut)
	}
	q.closed = true
	q.mu.Unlock()
	q.wake()
}

// Len is the number of requests waiting.
func (q *Queue) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

func (q *Queue) wake() {
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

func (q *Queue) pop() (*Request, bool) {
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

// drained is true once the queue is closed and empty.
func (q *Queue) drained() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.closed && len(q.items) == 0
}

func (q *Queue) ready() <-chan struct{} { return q.notify }
