package engine

import "sync"

// Queue is an unbounded, goroutine-safe queue of requests feeding Engine.Serve.
type Queue struct {
	mu     sync.Mutex
	items  []*Request
	closed bool
	notify chan struct{} // has a value while items may be waiting or the queue just closed
}

// NewQueue makes an empty, open queue.
func NewQueue() *Queue { return &Queue{notify: make(chan struct{}, 1)} }

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
