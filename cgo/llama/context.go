package llama

/*
#include <stdlib.h>
#include "llama.h"
#include "ggml-cpu.h"

// umad_threadpool makes the CPU worker threads a context keeps for its whole life.
static struct ggml_threadpool * umad_threadpool(int n_threads) {
	struct ggml_threadpool_params p = ggml_threadpool_params_default(n_threads);
	return ggml_threadpool_new(&p);
}

void umad_llama_free(struct llama_context *ctx); // free.cpp
*/
import "C"

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"github.com/umad-dev/umad/internal/sysmem"
)

// KVType is the storage type of the KV cache. F32 is exact; F16 (llama.cpp's default)
// and Q8_0 move log-probs by about 1e-3 (docs/ARCHITECTURE.md section 4).
type KVType string

// KV cache types.
const (
	KVF16  KVType = "f16"
	KVF32  KVType = "f32"
	KVQ8_0 KVType = "q8_0"
)

// FlashAttn selects llama.cpp's flash-attention path.
type FlashAttn string

// Flash-attention settings.
const (
	FlashAuto FlashAttn = "auto"
	FlashOn   FlashAttn = "on"
	FlashOff  FlashAttn = "off"
)

// ParseKVType parses f16, f32 or q8_0.
func ParseKVType(s string) (KVType, error) {
	switch t := KVType(strings.ToLower(s)); t {
	case KVF16, KVF32, KVQ8_0:
		return t, nil
	}
	return "", fmt.Errorf("unknown KV cache type %q (want f16, f32 or q8_0)", s)
}

// ParseFlashAttn parses auto, on or off.
func ParseFlashAttn(s string) (FlashAttn, error) {
	switch f := FlashAttn(strings.ToLower(s)); f {
	case FlashAuto, FlashOn, FlashOff:
		return f, nil
	}
	return "", fmt.Errorf("unknown flash-attention setting %q (want auto, on or off)", s)
}

// ContextParams sizes a context.
type ContextParams struct {
	// NCtx is the KV cells in all: shared by all sequences when KVUnified, otherwise
	// llama.cpp gives each sequence GGML_PAD(NCtx/NSeqMax, 256) cells of its own.
	NCtx      int
	NBatch    int // most tokens one Decode may carry (default 2048)
	NSeqMax   int // parallel sequences (default 1, at most MaxSequences())
	Threads   int // n_threads and n_threads_batch; 0 = PhysicalCores()
	KVType    KVType
	FlashAttn FlashAttn
	// KVUnified lets sequences share KV cells, so a prompt decoded once with K sequence
	// ids serves all K samples, but every token attends over the cells of all sequences
	// (masked). Without it each sequence has its own stream of cells: a batch token
	// belongs to one sequence, and SeqCopy copies whole streams.
	KVUnified bool
}

// Context is a llama.cpp inference context: KV memory for NSeqMax sequences.
type Context struct {
	mu sync.Mutex
	c  *C.struct_llama_context
	// pool is the context's own CPU threadpool (nil if ggml returned none). Without it
	// ggml starts and joins fresh threads for every graph it computes, a micro-batch
	// each: on a small model at 2 threads that made debate decode steps 2x slower.
	pool   *C.struct_ggml_threadpool
	model  *Model
	nVocab int
	p      ContextParams
	// adapters are the LoRA adapters applied, so that they are not freed under the context.
	adapters []*Adapter
	// TokensDecoded counts every token sent to llama_decode, so tests and benchmarks
	// can see how much prefill work prefix sharing saved.
	TokensDecoded int64
}

// ErrNoMemory is returned by NewContext when the KV cache would not fit in the memory
// the machine has available.
var ErrNoMemory = errors.New("not enough memory")

// MaxThreads is ggml's GGML_MAX_N_THREADS: the most threads a context may use.
const MaxThreads = 512

// checkKVMemory refuses a context whose KV cache alone would exceed the memory available
// now, before llama.cpp allocates it (a huge n_ctx otherwise takes the machine's memory).
// With layers offloaded to a GPU the cache lives there, and llama.cpp reports its own
// allocation failure.
func (m *Model) checkKVMemory(p ContextParams) error {
	if m.gpuLayers > 0 {
		return nil
	}
	nHead := int64(C.llama_model_n_head(m.m))
	if nHead < 1 {
		return nil
	}
	arch := m.architectureLocked()
	headK := metaInt(m, arch+".attention.key_length", int64(C.llama_model_n_embd(m.m))/nHead)
	kv := sysmem.KVCache{Layers: int(C.llama_model_n_layer(m.m)), KVHeads: int(C.llama_model_n_head_kv(m.m)),
		HeadK: int(headK), HeadV: int(metaInt(m, arch+".attention.value_length", headK)),
		NCtx: p.NCtx, Seqs: p.NSeqMax, Unified: p.KVUnified, Type: string(p.KVType)}
	need, cells := kv.Bytes(), kv.Cells()
	if avail, ok := sysmem.Available(); ok && need > float64(avail) {
		return fmt.Errorf("new context: a KV cache of %d cells needs %.1f GiB, more than the %.1f GiB available: %w",
			cells, need/(1<<30), float64(avail)/(1<<30), ErrNoMemory)
	}
	return nil
}

// ErrNoKVSlot is returned by Decode when the KV memory has no room for the batch.
var ErrNoKVSlot = errors.New("llama: no room in the KV cache for this batch")

// noGraphReuse turns off llama.cpp's reuse of the previous graph for a batch of the same
// shape (read when a context is created). Its check compares the adapter set by address,
// always the context's own map, so after SetAdapter, RemoveAdapter or ClearAdapters the
// next decode would run the old adapters (freed ones too, a use after free). The price is a
// graph build on the CPU at every decode.
var noGraphReuse sync.Once

// NewContext creates a context for the model.
func (m *Model) NewContext(p ContextParams) (*Context, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	if p.NSeqMax == 0 {
		p.NSeqMax = 1
	}
	if p.NBatch == 0 {
		p.NBatch = 2048
	}
	if p.Threads <= 0 {
		p.Threads = PhysicalCores()
	}
	if p.KVType == "" {
		p.KVType = KVF16
	}
	if p.FlashAttn == "" {
		p.FlashAttn = FlashAuto
	}
	switch {
	case p.NCtx <= 0:
		return nil, fmt.Errorf("new context: context size must be positive, got %d", p.NCtx)
	case p.NSeqMax < 1 || p.NSeqMax > MaxSequences():
		return nil, fmt.Errorf("new context: %d parallel sequences; llama.cpp allows 1 to %d", p.NSeqMax, MaxSequences())
	case p.NBatch < 1:
		return nil, fmt.Errorf("new context: batch size must be positive, got %d", p.NBatch)
	case p.KVType == KVQ8_0 && p.FlashAttn == FlashOff:
		return nil, errors.New("new context: a q8_0 KV cache needs flash attention (auto or on)")
	case p.Threads > MaxThreads:
		// ggml asserts (GGML_MAX_N_THREADS) and then hangs.
		return nil, fmt.Errorf("new context: %d threads; llama.cpp allows at most %d", p.Threads, MaxThreads)
	}
	if err := m.checkKVMemory(p); err != nil {
		return nil, err
	}
	if _, err := ParseKVType(string(p.KVType)); err != nil {
		return nil, err
	}
	if _, err := ParseFlashAttn(string(p.FlashAttn)); err != nil {
		return nil, err
	}
	cp := C.llama_context_default_params()
	cp.n_ctx = C.uint32_t(p.NCtx)
	cp.n_batch = C.uint32_t(p.NBatch)
	cp.n_ubatch = C.uint32_t(min(p.NBatch, 512))
	cp.n_seq_max = C.uint32_t(p.NSeqMax)
	cp.n_threads = C.int32_t(p.Threads)
	cp.n_threads_batch = C.int32_t(p.Threads)
	cp.kv_unified = C.bool(p.KVUnified)
	cp.no_perf = C.bool(true)
	switch p.KVType {
	case KVF32:
		cp.type_k, cp.type_v = C.GGML_TYPE_F32, C.GGML_TYPE_F32
	case KVF16:
		cp.type_k, cp.type_v = C.GGML_TYPE_F16, C.GGML_TYPE_F16
	case KVQ8_0:
		cp.type_k, cp.type_v = C.GGML_TYPE_Q8_0, C.GGML_TYPE_Q8_0
	}
	switch p.FlashAttn {
	case FlashAuto:
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_AUTO
	case FlashOn:
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_ENABLED
	case FlashOff:
		cp.flash_attn_type = C.LLAMA_FLASH_ATTN_TYPE_DISABLED
	}
	takeLastError()
	noGraphReuse.Do(func() { os.Setenv("LLAMA_GRAPH_REUSE_DISABLE", "1") })
	c := C.llama_init_from_model(m.m, cp)
	if c == nil {
		return nil, fmt.Errorf("new context: llama.cpp: %s", takeLastError())
	}
	ctx := &Context{c: c, model: m, nVocab: int(C.llama_vocab_n_tokens(m.vocab)), p: p}
	if ctx.pool = C.umad_threadpool(C.int(p.Threads)); ctx.pool != nil {
		C.llama_attach_threadpool(c, ctx.pool, ctx.pool)
	}
	m.contexts[ctx] = true
	return ctx, nil
}

// Params are the context's resolved parameters.
func (c *Context) Params() ContextParams { return c.p }

// Model is the model the context was made from.
func (c *Context) Model() *Model { return c.model }

// Close frees the context.
func (c *Context) Close() error {
	c.mu.Lock()
	if c.c == nil {
		c.mu.Unlock()
		return ErrClosed
	}
	C.umad_llama_free(c.c)
	c.c = nil
	if c.pool != nil {
		C.ggml_threadpool_free(c.pool)
		c.pool = nil
	}
	// Released first: SetWeights holds the model's lock while it takes the contexts'.
	c.mu.Unlock()
	c.model.mu.Lock()
	delete(c.model.contexts, c)
	c.releaseAdapters()
	c.model.mu.Unlock()
	return nil
}

// releaseAdapters forgets the applied adapters; c.model.mu must be held.
func (c *Context) releaseAdapters() {
	for _, a := range c.adapters {
		a.users--
	}
	c.adapters = nil
}

func (c *Context) lock() error {
	c.mu.Lock()
	if c.c == nil {
		c.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// lockWithModel takes the model's lock, then the context's: SetWeights' order, so the two
// cannot deadlock. The context is checked once both are held.
func (c *Context) lockWithModel() error {
	c.model.mu.Lock()
	if err := c.lock(); err != nil {
		c.model.mu.Unlock()
		return err
	}
	return nil
}

func (c *Context) unlockWithModel() {
	c.mu.Unlock()
	c.model.mu.Unlock()
}

// Decode runs the model on a batch. Logits of tokens added with logits=true are then
// available through Logits until the next Decode.
func (c *Context) Decode(b *Batch) error {
	if err := c.lock(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if b.b.token == nil {
		return ErrClosed
	}
	n := int(b.b.n_tokens)
	if n == 0 {
		return errors.New("decode: empty batch")
	}
	if n > c.p.NBatch {
		return fmt.Errorf("decode: %d tokens exceed the context's batch size %d", n, c.p.NBatch)
	}
	toks := unsafe.Slice(b.b.token, n)
	pos := unsafe.Slice(b.b.pos, n)
	nseq := unsafe.Slice(b.b.n_seq_id, n)
	seqs := unsafe.Slice(b.b.seq_id, n)
	for i := 0; i < n; i++ {
		if int(toks[i]) < 0 || int(toks[i]) >= c.nVocab {
			return fmt.Errorf("decode: token %d at batch index %d is outside the vocabulary [0, %d)", toks[i], i, c.nVocab)
		}
		if int(pos[i]) < 0 || int(pos[i]) >= c.p.NCtx {
			return fmt.Errorf("decode: position %d at batch index %d is outside the context [0, %d)", pos[i], i, c.p.NCtx)
		}
		if !c.p.KVUnified && nseq[i] > 1 {
			return fmt.Errorf("decode: token at batch index %d belongs to %d sequences; without a unified KV cache a token belongs to one", i, nseq[i])
		}
		for _, s := range unsafe.Slice(seqs[i], int(nseq[i])) {
			if int(s) < 0 || int(s) >= c.p.NSeqMax {
				return fmt.Errorf("decode: sequence id %d at batch index %d is outside [0, %d)", s, i, c.p.NSeqMax)
			}
		}
	}
	takeLastError()
	ret := C.llama_decode(c.c, b.b)
	if c.pool != nil {
		// The workers spin between a decode's micro-batches (poll); between decodes they
		// would spin on the cores the sampler and the debate then need, so they sleep
		// until the next graph wakes them.
		C.ggml_threadpool_pause(c.pool)
	}
	c.TokensDecoded += int64(n)
	switch {
	case ret == 0:
		return nil
	case ret == 1:
		return ErrNoKVSlot
	default:
		return fmt.Errorf("decode: llama.cpp returned %d: %s", int(ret), takeLastError())
	}
}

// Logits returns the logits row of batch index i of the last Decode (which must have
// been added with logits=true). The slice aliases llama.cpp's buffer: it is valid only
// until the next Decode or Close and must not be kept.
func (c *Context) Logits(i int) ([]float32, error) {
	if err := c.lock(); err != nil {
		return nil, err
	}
	defer c.mu.Unlock()
	p := C.llama_get_logits_ith(c.c, C.int32_t(i))
	if p == nil {
		return nil, fmt.Errorf("logits: batch index %d has no logits", i)
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(p)), c.nVocab), nil
}

// SeqRemove removes the tokens of sequence seq with positions in [p0, p1); p1 < 0 means
// to the end. seq < 0 matches every sequence.
func (c *Context) SeqRemove(seq, p0, p1 int) error {
	if err := c.lock(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if seq >= c.p.NSeqMax {
		return fmt.Errorf("seq remove: sequence %d outside [0, %d)", seq, c.p.NSeqMax)
	}
	if !C.llama_memory_seq_rm(C.llama_get_memory(c.c), C.llama_seq_id(seq), C.llama_pos(p0), C.llama_pos(p1)) {
		return fmt.Errorf("seq remove: llama.cpp cannot remove part of sequence %d", seq)
	}
	return nil
}

// SeqCopy makes sequence dst share the cells of sequence src with positions in [p0, p1).
// Without KVUnified, dst's stream becomes a copy of src's (dst loses its own cells, the
// data moves at the start of the next Decode), and only whole sequences can be copied:
// p0 <= 0 and p1 < 0.
func (c *Context) SeqCopy(src, dst, p0, p1 int) error {
	if err := c.lock(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if src < 0 || src >= c.p.NSeqMax || dst < 0 || dst >= c.p.NSeqMax {
		return fmt.Errorf("seq copy: sequences %d -> %d outside [0, %d)", src, dst, c.p.NSeqMax)
	}
	if !c.p.KVUnified && src != dst && (p0 > 0 || p1 >= 0) {
		// llama.cpp aborts the process on a partial copy between streams.
		return fmt.Errorf("seq copy: positions [%d, %d) of sequence %d: without a unified KV cache only whole sequences can be copied", p0, p1, src)
	}
	C.llama_memory_seq_cp(C.llama_get_memory(c.c), C.llama_seq_id(src), C.llama_seq_id(dst), C.llama_pos(p0), C.llama_pos(p1))
	return nil
}

// SeqPosMax is the largest position held for the sequence, or -1 when it is empty.
func (c *Context) SeqPosMax(seq int) (int, error) {
	if err := c.lock(); err != nil {
		return 0, err
	}
	defer c.mu.Unlock()
	if seq < 0 || seq >= c.p.NSeqMax {
		return 0, fmt.Errorf("seq pos: sequence %d outside [0, %d)", seq, c.p.NSeqMax)
	}
	return int(C.llama_memory_seq_pos_max(C.llama_get_memory(c.c), C.llama_seq_id(seq))), nil
}

// ClearMemory empties the KV memory of every sequence.
func (c *Context) ClearMemory() error {
	if err := c.lock(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	C.llama_memory_clear(C.llama_get_memory(c.c), C.bool(true))
	return nil
}

// SetAdapter applies a LoRA adapter of this context's model with the given scale (on top
// of the adapters already applied; 1 is the adapter's own alpha/rank scale). The KV cells
// already computed are not recomputed: clear them when they must reflect the adapter.
func (c *Context) SetAdapter(a *Adapter, scale float32) error {
	if err := c.lockWithModel(); err != nil {
		return err
	}
	defer c.unlockWithModel()
	if a.model != c.model {
		return errors.New("set adapter: the adapter belongs to another model")
	}
	if a.a == nil {
		return ErrClosed
	}
	if C.llama_set_adapter_lora(c.c, a.a, C.float(scale)) != 0 {
		return fmt.Errorf("set adapter: llama.cpp: %s", takeLastError())
	}
	if !slices.Contains(c.adapters, a) {
		c.adapters = append(c.adapters, a)
		a.users++
	}
	return nil
}

// RemoveAdapter stops applying a LoRA adapter.
func (c *Context) RemoveAdapter(a *Adapter) error {
	if err := c.lockWithModel(); err != nil {
		return err
	}
	defer c.unlockWithModel()
	if a.a == nil {
		return ErrClosed
	}
	i := slices.Index(c.adapters, a)
	if i < 0 || C.llama_rm_adapter_lora(c.c, a.a) != 0 {
		return errors.New("remove adapter: the adapter is not applied to this context")
	}
	c.adapters = slices.Delete(c.adapters, i, i+1)
	a.users--
	return nil
}

// ClearAdapters stops applying every LoRA adapter.
func (c *Context) ClearAdapters() error {
	if err := c.lockWithModel(); err != nil {
		return err
	}
	defer c.unlockWithModel()
	C.llama_clear_adapter_lora(c.c)
	c.releaseAdapters()
	return nil
}

// Batch is a llama_batch in C memory (a batch in Go memory would put Go pointers in C
// memory, which cgo forbids).
type Batch struct {
	b        C.struct_llama_batch
	capacity int
	maxSeqs  int
}

// NewBatch allocates a batch of up to capacity tokens, each in up to maxSeqs sequences.
func NewBatch(capacity, maxSeqs int) (*Batch, error) {
	if capacity < 1 || maxSeqs < 1 {
		return nil, fmt.Errorf("new batch: capacity %d and sequences per token %d must be positive", capacity, maxSeqs)
	}
	b := C.llama_batch_init(C.int32_t(capacity), 0, C.int32_t(maxSeqs))
	return &Batch{b: b, capacity: capacity, maxSeqs: maxSeqs}, nil
}

// Len is the number of tokens in the batch.
func (b *Batch) Len() int { return int(b.b.n_tokens) }

// Clear empties the batch.
func (b *Batch) Clear() { b.b.n_tokens = 0 }

// Add appends a token at position pos belonging to the given sequences; logits asks for
// its output row. It returns the token's batch index.
func (b *Batch) Add(tok int32, pos int, seqs []int32, logits bool) (int, error) {
	if b.b.token == nil {
		return 0, ErrClosed
	}
	i := int(b.b.n_tokens)
	if i >= b.capacity {
		return 0, fmt.Errorf("batch add: batch is full (%d tokens)", b.capacity)
	}
	if len(seqs) == 0 || len(seqs) > b.maxSeqs {
		return 0, fmt.Errorf("batch add: %d sequence ids, want 1 to %d", len(seqs), b.maxSeqs)
	}
	unsafe.Slice(b.b.token, b.capacity)[i] = C.llama_token(tok)
	unsafe.Slice(b.b.pos, b.capacity)[i] = C.llama_pos(pos)
	unsafe.Slice(b.b.n_seq_id, b.capacity)[i] = C.int32_t(len(seqs))
	dst := unsafe.Slice(unsafe.Slice(b.b.seq_id, b.capacity)[i], b.maxSeqs)
	for j, s := range seqs {
		dst[j] = C.llama_seq_id(s)
	}
	var l C.int8_t
	if logits {
		l = 1
	}
	unsafe.Slice(b.b.logits, b.capacity)[i] = l
	b.b.n_tokens++
	return i, nil
}

// Close frees the batch.
func (b *Batch) Close() error {
	if b.b.token == nil {
		return ErrClosed
	}
	C.llama_batch_free(b.b)
	b.b = C.struct_llama_batch{}
	return nil
}
