// Package engine runs rollouts and, built on them, debates.
//
// The rollout engine (this file) takes requests of the form "K samples of this prompt",
// keeps every slot of a llama.cpp context busy (continuous batching), decodes each prompt
// once for all its samples and the common prefix of different prompts once (prefix
// sharing by copying KV streams), and returns for every generated token its id, its
// log-probability under softmax(logits/T) over the full vocabulary, and the entropy of
// that distribution.
//
// Each slot is one llama.cpp sequence with its own KV stream (kv_unified off), so a token
// attends only to its own sequence's cells; with one unified cache every token would
// attend over the cells of all slots, masked, and attention would cost slots x context.
package engine

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"time"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/sampler"
)

// Finish says why a sample ended.
type Finish string

// Finish reasons.
const (
	FinishStop   Finish = "stop"   // an end-of-generation or stop token was drawn (and kept)
	FinishLength Finish = "length" // MaxTokens reached, or the sequence's context is full
)

// Request asks for K samples continuing one prompt.
type Request struct {
	ID        uint64 // returned with the result; also the default RNG stream id
	Prompt    []int32
	K         int
	MaxTokens int
	Stop      []int32 // stop tokens besides the model's end-of-generation tokens
	Params    sampler.Params
	Seed      uint64
	// Stream identifies the request's randomness: sample k draws from
	// sampler.NewStream(Seed, append(Stream, k)...). Empty means [ID].
	Stream []uint64
	// IgnoreEOG keeps drawing past end-of-generation tokens, so every sample has exactly
	// MaxTokens tokens (benchmarks use it to compare fixed amounts of work).
	IgnoreEOG bool
}

// Sample is one completed continuation.
type Sample struct {
	Index     int       `json:"index"`
	Tokens    []int32   `json:"tokens"`
	LogProbs  []float32 `json:"logprobs"`
	Entropies []float32 `json:"entropies"`
	// KeptMass is, per token, the probability mass that top-k/top-p/min-p kept: the draw
	// came from softmax(logits/T) renormalised over it (importance ratios need it). Nil
	// when no token's draw was cut.
	KeptMass []float32 `json:"kept_mass,omitempty"`
	Finish   Finish    `json:"finish"`
}

// Result is the outcome of one request: its K samples in index order, or an error that
// concerns this request only (e.g. a prompt longer than the context).
type Result struct {
	Request *Request
	Samples []Sample
	Err     error
}

// Options configure an Engine.
type Options struct {
	Slots int // parallel sequences (default 16)
	// SeqContext is the most tokens per sequence, prompt plus generation (default 4096, at
	// most the model's). Each slot has KV cells for that many, rounded up to a multiple of 256.
	SeqContext int
	BatchSize  int // most tokens per llama.cpp decode (default 2048)
	Threads    int // llama.cpp threads; 0 = physical cores
	KVType     KVType
	FlashAttn  FlashAttn
	// SamplerWorkers spread sampling over cores; 0 = as many as llama.cpp threads. Sampling
	// runs between decodes, on the cores llama.cpp was given, so engines sharing a machine
	// (SharedThreads) do not oversubscribe it.
	SamplerWorkers int
}

// Stats count the engine's work since it was made.
type Stats struct {
	Steps        int64 // llama.cpp decode calls
	PromptTokens int64 // prompt tokens sent to llama.cpp
	// NaivePromptTokens is what decoding every sample's prompt on its own would send:
	// PromptTokens over it is what sharing prompts (a request's K samples, requests with
	// identical prompts, and common prefixes of different prompts) leaves to decode.
	NaivePromptTokens int64
	GeneratedTokens   int64 // tokens drawn
	// The positions summed over the same tokens: a token's cost in llama.cpp grows with
	// its position (it attends over all before it), so bench debate prices the tokens at
	// their positions. A drawn token's position is that of the row it was drawn from.
	PromptPositions, NaivePromptPositions, GeneratedPositions int64

	Moves      int64         // sequences moved to a lower slot (a KV stream copy each)
	DecodeTime time.Duration // inside llama_decode
	SampleTime time.Duration // inside the sampler
}

// Engine generates samples with one llama.cpp context.
type Engine struct {
	model   *llama.Model
	ctx     *llama.Context
	batch   *llama.Batch
	sampler *sampler.Batch
	opt     Options
	nVocab  int
	eog     map[int32]bool
	slots   []slot
	stats   Stats
	// step's sampling arguments, kept between steps so a step allocates nothing
	rows   [][]float32
	params []sampler.Params
	rngs   []*sampler.Stream
	who    []int
	draws  []sampler.Draw
}

// slotState is what a slot does in the next step.
type slotState uint8

const (
	idle     slotState = iota
	prefill            // decodes its job's prompt, for itself and the slots waiting for it
	waiting            // waits for another slot's prefill to reach a prefix, then copies its stream
	decoding           // feeds one token per step
)

type slot struct {
	job *job
	// source is the job whose prefill a waiting slot copies: its own job, or another job
	// with the identical prompt (debate agents on one model get the same message), or one
	// whose prompt shares want tokens with this slot's (the template and question).
	source    *job
	want      int // prompt tokens a waiting slot takes: its whole prompt, or a prefix to prefill after
	k         int
	state     slotState
	pos       int // position of the next token to feed
	last      int32
	rng       sampler.Stream
	row       int // batch index of this slot's logits in the current step, -1 if none
	tokens    []int32
	logprobs  []float32
	keptMass  []float32
	entropies []float32
}

// job is a request in flight.
type job struct {
	req     *Request
	next    int // next sample index to start
	done    int
	samples []Sample
	// prefilling says a slot decodes the prompt (state prefill), or waits for another
	// job's prefill to reach a prefix it then decodes the rest from (waiting, want < len).
	prefilling bool
	prefillN   int // prompt tokens that slot holds or has sent so far
	stop       map[int32]bool
}

// CheckSlots refuses a number of parallel sequences llama.cpp cannot run.
func CheckSlots(n int) error {
	if n < 1 || n > llama.MaxSequences() {
		return fmt.Errorf("%d slots; llama.cpp allows 1 to %d parallel sequences", n, llama.MaxSequences())
	}
	return nil
}

// New makes an engine for the model.
func New(model *Model, opt Options) (*Engine, error) {
	m := model.model // the binding's
	if opt.Slots == 0 {
		opt.Slots = 16
	}
	if opt.SeqContext == 0 {
		opt.SeqContext = 4096
		if n := m.NCtxTrain(); n > 0 && n < opt.SeqContext {
			opt.SeqContext = n
		}
	}
	if opt.BatchSize == 0 {
		opt.BatchSize = 2048
	}
	if err := CheckSlots(opt.Slots); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	switch {
	case opt.SeqContext < 2:
		return nil, fmt.Errorf("engine: context of %d tokens per sequence is too small", opt.SeqContext)
	case opt.BatchSize < opt.Slots:
		return nil, fmt.Errorf("engine: batch size %d is smaller than the %d slots", opt.BatchSize, opt.Slots)
	}
	// One KV stream per slot, of GGML_PAD(NCtx/NSeqMax, 256) >= SeqContext cells.
	ctx, err := m.NewContext(llama.ContextParams{
		NCtx:      opt.Slots * opt.SeqContext,
		NBatch:    opt.BatchSize,
		NSeqMax:   opt.Slots,
		Threads:   opt.Threads,
		KVType:    llama.KVType(opt.KVType),
		FlashAttn: llama.FlashAttn(opt.FlashAttn),
	})
	if err != nil {
		return nil, err
	}
	batch, err := llama.NewBatch(opt.BatchSize, 1)
	if err != nil {
		ctx.Close()
		return nil, err
	}
	e := &Engine{
		model: m, ctx: ctx, batch: batch, opt: opt,
		sampler: sampler.NewBatch(samplerWorkers(opt)),
		nVocab:  m.NVocab(),
		eog:     map[int32]bool{},
		slots:   make([]slot, opt.Slots),
	}
	for _, t := range m.EOGTokens() {
		e.eog[t] = true
	}
	return e, nil
}

// samplerWorkers resolves Options.SamplerWorkers: the llama.cpp thread count by default.
func samplerWorkers(opt Options) int {
	switch {
	case opt.SamplerWorkers > 0:
		return opt.SamplerWorkers
	case opt.Threads > 0:
		return opt.Threads
	}
	return llama.PhysicalCores()
}

// Close frees the engine's context; the model stays open.
func (e *Engine) Close() error {
	if e.ctx == nil {
		return llama.ErrClosed
	}
	e.sampler.Close()
	e.batch.Close()
	err := e.ctx.Close()
	e.ctx = nil
	return err
}

// Stats returns the work counters.
func (e *Engine) Stats() Stats { return e.stats }

// Tokenize tokenizes a rendered prompt: special tokens parsed, none added (the chat
// template has them).
func (e *Engine) Tokenize(text string) ([]int32, error) { return e.model.Tokenize(text, false, true) }

// Detokenize is the text of generated tokens, special tokens (EOS) left out.
func (e *Engine) Detokenize(tokens []int32) (string, error) { return e.model.Detokenize(tokens, false) }

// SeqContext is the most tokens per sequence, prompt plus generation.
func (e *Engine) SeqContext() int { return e.opt.SeqContext }

// Slots is the number of sequences generated at once.
func (e *Engine) Slots() int { return e.opt.Slots }

// TokensDecoded counts every token sent to llama.cpp (prompts and generated tokens).
func (e *Engine) TokensDecoded() int64 { return e.ctx.TokensDecoded }

// check validates a request against the engine.
func (e *Engine) check(r *Request) error {
	switch {
	case r.K < 1:
		return fmt.Errorf("request %d: K must be at least 1, got %d", r.ID, r.K)
	case r.MaxTokens < 1:
		return fmt.Errorf("request %d: max tokens must be at least 1, got %d", r.ID, r.MaxTokens)
	case len(r.Prompt) == 0:
		return fmt.Errorf("request %d: empty prompt", r.ID)
	case len(r.Prompt) >= e.opt.SeqContext:
		return fmt.Errorf("request %d: prompt of %d tokens does not fit the context of %d tokens per sequence",
			r.ID, len(r.Prompt), e.opt.SeqContext)
	}
	for i, t := range r.Prompt {
		if t < 0 || int(t) >= e.nVocab {
			return fmt.Errorf("request %d: prompt token %d at %d is outside the vocabulary [0, %d)", r.ID, t, i, e.nVocab)
		}
	}
	if err := r.Params.Validate(); err != nil {
		return fmt.Errorf("request %d: %w", r.ID, err)
	}
	return nil
}

// Generate runs the requests to completion, calling emit (from the calling goroutine)
// once per request as soon as all its samples are done. Invalid requests are emitted with
// an error and do not stop the others. If ctx is cancelled, Generate returns ctx.Err()
// after the current step; requests not yet emitted are dropped.
func (e *Engine) Generate(ctx context.Context, reqs []Request, emit func(Result)) error {
	q := NewQueue()
	q.Push(reqs...)
	q.Close()
	return e.Serve(ctx, q, emit)
}

// Serve is Generate for a stream of requests: it takes requests from q as slots free up,
// waits when q is empty but open, and returns once q is closed and every request taken
// from it has been emitted. emit may push more requests to q (a debate's next turn).
// On a stepped queue (a deterministic debate) each step waits for the debate's tick.
func (e *Engine) Serve(ctx context.Context, q *Queue, emit func(Result)) error {
	if e.ctx == nil {
		return llama.ErrClosed
	}
	var active []*job // jobs with samples still to start, in arrival order
	defer e.reset()
	// The calling thread is one of llama.cpp's compute threads: keep it one OS thread for
	// the whole run rather than whichever the runtime resumes the goroutine on after each
	// decode (steadier steps on a small machine: bench/RESULTS.md).
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := q.AwaitStep(ctx); err != nil {
			return err
		}
		// Admit work into free slots: first the remaining samples of jobs in flight,
		// then new jobs, so few requests are open at once.
		for free := e.freeSlot(); free >= 0; free = e.freeSlot() {
			active = slices.DeleteFunc(active, func(j *job) bool { return j.next >= j.req.K })
			var j *job
			if len(active) > 0 {
				j = active[0]
			} else if j = e.take(q, emit); j != nil {
				active = append(active, j)
			} else {
				break
			}
			if err := e.start(j, free); err != nil {
				return err
			}
		}
		if !e.anyBusy() {
			if q.Drained() {
				return nil
			}
			if q.Stepped() { // idle this step: the clock brings the next requests
				q.EndStep()
				continue
			}
			select { // idle: wait for more requests
			case <-q.Ready():
			case <-ctx.Done():
				return ctx.Err()
			}
			continue
		}
		if err := e.step(emit); err != nil {
			return err
		}
		q.EndStep()
	}
}

// take pops the next valid request from q as a job, emitting invalid ones with their
// error; nil when q has nothing now.
func (e *Engine) take(q *Queue, emit func(Result)) *job {
	for {
		r, ok := q.Pop()
		if !ok {
			return nil
		}
		if err := e.check(r); err != nil {
			emit(Result{Request: r, Err: err})
			continue
		}
		j := &job{req: r, samples: make([]Sample, r.K), stop: map[int32]bool{}}
		for _, t := range r.Stop {
			j.stop[t] = true
		}
		return j
	}
}

// step builds one batch (one token per decoding slot, prompt chunks in the room left),
// decodes it, hands decoded prompts and prefixes to the slots waiting for them, samples
// every slot that has logits, and retires finished samples.
//
// Tokens go into the batch in slot order: llama.cpp splits a batch over separate KV
// streams into micro-batches of consecutive sequence ids with equally many tokens each
// (split_equal), so slot order lets all decoding slots and the first token of each
// prompt chunk share one micro-batch; any other order cuts it into more graph runs.
func (e *Engine) step(emit func(Result)) error {
	if err := e.compact(); err != nil {
		return err
	}
	b := e.batch
	b.Clear()
	room := e.opt.BatchSize
	for i := range e.slots {
		if e.slots[i].state == decoding {
			room--
		}
	}
	for i := range e.slots {
		sl := &e.slots[i]
		sl.row = -1
		switch sl.state {
		case decoding:
			row, err := b.Add(sl.last, sl.pos, []int32{int32(i)}, true)
			if err != nil {
				return err
			}
			sl.row = row
			sl.pos++
		case prefill:
			j := sl.job
			p := j.req.Prompt
			for ; j.prefillN < len(p) && room > 0; room-- {
				last := j.prefillN == len(p)-1
				row, err := b.Add(p[j.prefillN], j.prefillN, []int32{int32(i)}, last)
				if err != nil {
					return err
				}
				e.stats.PromptTokens++
				e.stats.PromptPositions += int64(j.prefillN)
				if last {
					sl.row = row
				}
				j.prefillN++
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	t0 := time.Now()
	if err := e.ctx.Decode(b); err != nil {
		return err
	}
	e.stats.DecodeTime += time.Since(t0)
	e.stats.Steps++

	if err := e.share(); err != nil {
		return err
	}

	// Sample every slot with a logits row; siblings fresh from one prefill share a row.
	rows, params, rngs, who := e.rows[:0], e.params[:0], e.rngs[:0], e.who[:0]
	for i := range e.slots {
		sl := &e.slots[i]
		if sl.row < 0 {
			continue
		}
		logits, err := e.ctx.Logits(sl.row)
		if err != nil {
			return err
		}
		rows = append(rows, logits)
		params = append(params, sl.job.req.Params)
		rngs = append(rngs, &sl.rng)
		who = append(who, i)
	}
	e.rows, e.params, e.rngs, e.who = rows, params, rngs, who
	if len(who) == 0 {
		return nil
	}
	if cap(e.draws) < len(who) {
		e.draws = make([]sampler.Draw, len(e.slots))
	}
	draws := e.draws[:len(who)]
	t1 := time.Now()
	err := e.sampler.Sample(rows, params, rngs, draws)
	clear(rows) // llama.cpp's rows are valid only until the next decode
	if err != nil {
		return fmt.Errorf("sample: %w", err)
	}
	e.stats.SampleTime += time.Since(t1)
	for n, i := range who {
		sl := &e.slots[i]
		d := draws[n]
		e.stats.GeneratedTokens++
		e.stats.GeneratedPositions += int64(sl.pos - 1) // every sampled slot decodes by now: its row is at pos-1
		sl.tokens = append(sl.tokens, d.Token)
		sl.logprobs = append(sl.logprobs, d.LogProb)
		sl.keptMass = append(sl.keptMass, d.KeptMass)
		sl.entropies = append(sl.entropies, d.Entropy)
		sl.last = d.Token
		var finish Finish
		switch {
		case (e.eog[d.Token] && !sl.job.req.IgnoreEOG) || sl.job.stop[d.Token]:
			finish = FinishStop
		case len(sl.tokens) >= sl.job.req.MaxTokens || sl.pos >= e.opt.SeqContext:
			finish = FinishLength
		default:
			continue
		}
		if err := e.retire(i, finish, emit); err != nil {
			return err
		}
	}
	return nil
}

// retire records slot i's sample, frees its KV cells and the slot, and emits the job's
// result when it was the last sample.
func (e *Engine) retire(i int, finish Finish, emit func(Result)) error {
	sl := &e.slots[i]
	j := sl.job
	j.samples[sl.k] = Sample{
		Index:     sl.k,
		Tokens:    slices.Clone(sl.tokens),
		LogProbs:  slices.Clone(sl.logprobs),
		KeptMass:  keptMass(sl.keptMass),
		Entropies: slices.Clone(sl.entropies),
		Finish:    finish,
	}
	j.done++
	if n := len(j.req.Prompt); j.next < j.req.K {
		// Hand the slot and its prompt cells straight to the job's next sample, which
		// decodes only the last prompt token again (for its logits).
		if err := e.ctx.SeqRemove(i, n-1, -1); err != nil {
			return err
		}
		sl = e.assign(j, i)
		sl.state, sl.pos, sl.last = decoding, n-1, j.req.Prompt[n-1]
		return nil
	}
	sl.state, sl.job = idle, nil
	if err := e.ctx.SeqRemove(i, -1, -1); err != nil {
		return err
	}
	if j.done == j.req.K {
		emit(Result{Request: j.req, Samples: j.samples})
	}
	return nil
}

// reset frees every slot and the KV memory, after a finished or interrupted run.
func (e *Engine) reset() {
	for i := range e.slots {
		e.slots[i].state, e.slots[i].job = idle, nil
	}
	_ = e.ctx.ClearMemory() // fails only on a closed context, where there is nothing to clear
}
