package engine

// Slots: which slot a sample gets, how it shares a prompt already decoded in another slot
// (copying its KV stream), and keeping the busy slots in one run of sequence ids.

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

// start puts sample j.next of job j into slot s. The prompt is shared: the slot copies
// the stream of a running slot whose cells hold the same prompt (a sibling, or a sample of
// another request with the identical prompt) and decodes only the last prompt token again
// (for its logits); if such a prompt is being decoded, the slot waits for that and copies
// it then; otherwise the slot decodes the prompt itself.
func (e *Engine) start(j *job, s int) error {
	sl := e.assign(j, s)
	if src := e.prefilling(j); src != nil {
		sl.state, sl.source = waiting, src
		return nil
	}
	for i := range e.slots {
		if o := &e.slots[i]; i != s && o.state == decoding && samePrompt(o.job, j) {
			n := len(j.req.Prompt)
			if err := e.copyStream(i, s); err != nil {
				return err
			}
			if err := e.ctx.SeqRemove(s, n-1, -1); err != nil {
				return err
			}
			sl.state, sl.pos, sl.last = decoding, n-1, j.req.Prompt[n-1]
			return nil
		}
	}
	// No slot holds the prompt: decode it (again, if earlier holders all finished).
	j.prefillSlot, j.prefillN = s, 0
	sl.state = prefill
	return nil
}

// prefilling returns the job whose prompt, identical to j's, is being decoded: j itself
// first, else another request's; nil if none.
func (e *Engine) prefilling(j *job) *job {
	if j.prefillSlot >= 0 {
		return j
	}
	for i := range e.slots {
		if o := &e.slots[i]; o.state == prefill && samePrompt(o.job, j) {
			return o.job
		}
	}
	return nil
}

// samePrompt reports whether two jobs decode the same prompt tokens.
func samePrompt(a, b *job) bool {
	return a == b || slices.Equal(a.req.Prompt, b.req.Prompt)
}

// copyStream gives slot dst the cells of slot src. llama.cpp copies whole streams; the
// data moves at the start of the next decode, before that decode writes anything, so
// later changes to src's cells in this step do not reach dst.
func (e *Engine) copyStream(src, dst int) error {
	return e.ctx.SeqCopy(src, dst, -1, -1)
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
		if e.slots[lo].state == prefill {
			e.slots[lo].job.prefillSlot = lo
		}
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
	e.stats.NaivePromptTokens += int64(len(r.Prompt))
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
