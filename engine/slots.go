package engine

// Slots: which slot a sample gets, how it shares the prompt prefix another slot holds or
// is decoding (copying its KV stream), and keeping the busy slots in one run of sequence ids.

import (
	"slices"

	"github.com/umad-dev/umad/sampler"
)

func (e *Engine) freeSlot() int {
	for i := range e.slots {
		if e.slots[i].state == idle {
			return i
		}
	}
	return -1
}

func (e *Engine) anyBusy() bool {
	for i := range e.slots {
		if e.slots[i].state != idle {
			return true
		}
	}
	return false
}

// minShare is the shortest common prompt prefix a slot takes from another slot instead
// of decoding it. Taking a prefix costs a copy of the source's whole KV stream (llama.cpp
// copies streams, not cells), which bench debate measures at the cost of a few prompt
// tokens; below 32 tokens the shared part is the chat template's opening, and waiting
// for another slot's prefill to reach it would hold a slot back for little.
const minShare = 32

// start puts sample j.next of job j into slot s. The slot takes the longest prompt prefix
// that another slot holds or is decoding (a sibling, a request with the identical prompt,
// or one that starts with the same template and question): with the whole prompt held it
// copies the stream and decodes only the last prompt token again (for its logits); with
// the whole prompt being decoded it waits and shares the logits row; with a prefix of at
// least minShare tokens it copies the prefix (at once, or once the source's prefill has
// reached it) and decodes only its own suffix; otherwise it decodes the prompt itself.
func (e *Engine) start(j *job, s int) error {
	sl := e.assign(j, s)
	n := len(j.req.Prompt)
	if j.prefilling { // a sibling prefills (or waits for a prefix of) this prompt
		sl.state, sl.source, sl.want = waiting, j, n
		return nil
	}
	src, l, ready := e.longestPrefix(j, s)
	switch {
	case l == n && ready: // a decoding slot holds the whole prompt
		if err := e.takePrefix(src, s, n-1); err != nil {
			return err
		}
		sl.state, sl.pos, sl.last = decoding, n-1, j.req.Prompt[n-1]
	case l == n: // the identical prompt is being decoded
		sl.state, sl.source, sl.want = waiting, e.slots[src].job, n
	case l >= minShare && ready:
		if err := e.takePrefix(src, s, l); err != nil {
			return err
		}
		j.prefilling, j.prefillN = true, l
		sl.state = prefill
	case l >= minShare: // wait for the source's prefill to reach the prefix
		j.prefilling, j.prefillN = true, 0
		sl.state, sl.source, sl.want = waiting, e.slots[src].job, l
	default:
		j.prefilling, j.prefillN = true, 0
		sl.state = prefill
	}
	return nil
}

// longestPrefix finds the slot other than s whose prompt shares the longest prefix with
// j's: l tokens, n when the prompts are identical and the whole prompt serves (the source
// has, or will have, its logits), else at most n-1 (j decodes at least its last token).
// ready says the source's cells hold the prefix now; a slot still decoding its prompt
// (or waiting to) offers the prefix it will hold. Ties go to a ready source.
func (e *Engine) longestPrefix(j *job, s int) (src, l int, ready bool) {
	p := j.req.Prompt
	n := len(p)
	src = -1
	for i := range e.slots {
		o := &e.slots[i]
		if i == s || o.state == idle {
			continue
		}
		q := o.job.req.Prompt
		var li int
		var ri bool
		switch {
		case o.state == decoding: // cells hold the prompt, but its last token when just copied
			if samePrompt(o.job, j) {
				li, ri = n, true
			} else {
				li, ri = min(commonPrefix(q[:min(o.pos, len(q))], p), n-1), true
			}
		case o.prefills():
			if samePrompt(o.job, j) {
				li = n
			} else {
				li = min(commonPrefix(q, p), n-1)
				ri = o.state == prefill && o.job.prefillN >= li
			}
		default: // waiting for another slot's prompt: holds nothing of its own yet
			continue
		}
		if li > l || (li == l && ri && !ready) {
			src, l, ready = i, li, ri
		}
	}
	return src, l, ready
}

// samePrompt reports whether two jobs decode the same prompt tokens.
func samePrompt(a, b *job) bool {
	return a == b || slices.Equal(a.req.Prompt, b.req.Prompt)
}

// commonPrefix is the length of the longest common prefix of a and b.
func commonPrefix(a, b []int32) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// takePrefix gives slot dst the cells of slot src at positions [0, n).
func (e *Engine) takePrefix(src, dst, n int) error {
	if err := e.copyStream(src, dst); err != nil {
		return err
	}
	return e.ctx.SeqRemove(dst, n, -1)
}

// share runs after each decode: a prompt decoded in full turns its slot to generation and
// shares its logits row with the slots waiting for the identical prompt; the slots waiting
// for a prefix that a prefill now holds copy it and go on to decode their own suffix.
func (e *Engine) share() error {
	for i := range e.slots {
		sl := &e.slots[i]
		if sl.state != prefill {
			continue
		}
		j := sl.job
		n := len(j.req.Prompt)
		if sl.row >= 0 { // the last prompt token was in this batch
			sl.state, sl.pos = decoding, n
			j.prefilling = false
		}
		for w := range e.slots {
			o := &e.slots[w]
			if o.state != waiting || o.source != j || o.want > j.prefillN {
				continue
			}
			if o.want == len(o.job.req.Prompt) { // the identical prompt, decoded in full
				if err := e.copyStream(i, w); err != nil {
					return err
				}
				o.state, o.pos, o.row, o.source = decoding, n, sl.row, nil
				continue
			}
			// A prefix: o is its job's prefill slot, and decodes the rest of its prompt
			// from the next step (a slot below i's that converts here serves its own
			// waiters one step later).
			if err := e.takePrefix(i, w, o.want); err != nil {
				return err
			}
			o.state, o.source = prefill, nil
			o.job.prefillN = o.want
		}
	}
	return nil
}

// copyStream gives slot dst the cells of slot src. llama.cpp copies whole streams; the
// data moves at the start of the next decode, before that decode writes anything, so
// later changes to src's cells in this step do not reach dst.
func (e *Engine) copyStream(src, dst int) error {
	return e.ctx.SeqCopy(src, dst, -1, -1)
}

// prefills says whether the slot decodes its job's prompt for the job's samples: it is
// prefilling, or waiting for a prefix of another job's prompt to prefill from (a slot
// waiting for a whole prompt decodes nothing of its own).
func (s *slot) prefills() bool {
	return s.state == prefill || (s.state == waiting && s.want < len(s.job.req.Prompt))
}

// feeds says whether the slot sends tokens in the next step.
func (s *slot) feeds() bool { return s.state == decoding || s.state == prefill }

// compact moves the work of the highest slots that send tokens into lower slots that
// send none (idle or waiting), until the slots that do are one run of sequence ids.
// llama.cpp cuts a batch over separate KV streams into a micro-batch per run of
// consecutive ids (split_equal), and every micro-batch reads all the weights again;
// copying a stream costs far less.
func (e *Engine) compact() error {
	lo, hi := 0, len(e.slots)-1
	for {
		for lo < hi && e.slots[lo].feeds() {
			lo++
		}
		for hi > lo && !e.slots[hi].feeds() {
			hi--
		}
		if lo >= hi {
			return nil
		}
		// A waiting slot has no cells of its own, so it can trade places with any slot.
		if err := e.copyStream(hi, lo); err != nil {
			return err
		}
		if err := e.ctx.SeqRemove(hi, -1, -1); err != nil {
			return err
		}
		e.slots[lo], e.slots[hi] = e.slots[hi], e.slots[lo]
		e.stats.Moves++
	}
}

// assign gives slot s to sample j.next of job j, with its own RNG stream.
func (e *Engine) assign(j *job, s int) *slot {
	r := j.req
	sl := &e.slots[s]
	ids := r.Stream
	if len(ids) == 0 {
		ids = []uint64{r.ID}
	}
	n := int64(len(r.Prompt))
	e.stats.NaivePromptTokens += n
	e.stats.NaivePromptPositions += n * (n - 1) / 2
	*sl = slot{job: j, k: j.next, row: -1,
		rng:    sampler.NewStream(r.Seed, append(slices.Clone(ids), uint64(j.next))...),
		tokens: sl.tokens[:0], logprobs: sl.logprobs[:0], keptMass: sl.keptMass[:0], entropies: sl.entropies[:0]}
	j.next++
	return sl
}

// keptMass is a sample's kept masses, nil when sampling cut nothing (the common case of no
// top-k/top-p, which then costs rollout files nothing).
func keptMass(m []float32) []float32 {
	for _, v := range m {
		if v != 1 {
			return slices.Clone(m)
		}
	}
	return nil
}
