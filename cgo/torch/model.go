package torch

/*
#include <stdlib.h>
#include "plugin.h"
*/
import "C"

import (
	"fmt"
	"unsafe"

	"github.com/umad-dev/umad/trainspec"
)

// Activation is the MLP's gate activation (UMAD_ACT_* in kernels/umad_torch.h).
type Activation int32

const (
	SiLU     Activation = C.UMAD_ACT_SILU
	GeLUTanh Activation = C.UMAD_ACT_GELU_TANH // GeLU in its tanh form
)

// ActivationNamed is the activation config.json's hidden_act names.
func ActivationNamed(name string) (Activation, error) {
	switch name {
	case "silu":
		return SiLU, nil
	case "gelu_pytorch_tanh":
		return GeLUTanh, nil
	}
	return 0, fmt.Errorf("activation %q: the torch plugin has silu and gelu_pytorch_tanh", name)
}

// DType is an element type of tensors crossing the ABI.
type DType int32

const (
	Float32  DType = C.UMAD_F32
	Float64  DType = C.UMAD_F64
	BFloat16 DType = C.UMAD_BF16
	Float16  DType = C.UMAD_F16
)

// Size is the width of one element in bytes.
func (d DType) Size() int {
	switch d {
	case Float64:
		return 8
	case BFloat16, Float16:
		return 2
	}
	return 4
}

// Kind selects which tensor of a parameter a read or write addresses.
type Kind int32

const (
	Weight   Kind = C.UMAD_WEIGHT
	Grad     Kind = C.UMAD_GRAD
	ExpAvg   Kind = C.UMAD_EXP_AVG    // AdamW first moment
	ExpAvgSq Kind = C.UMAD_EXP_AVG_SQ // AdamW second moment
	// Merged reads a base weight with its LoRA adapter folded in (W + alpha/r B A).
	Merged Kind = C.UMAD_MERGED
)

// Config is the architecture of a model, in Hugging Face config.json terms: its shape and
// its traits (model/arch's descriptor has them; hfmodel copies them here). The plugin reads
// the traits alone, never the architecture's name; their zero values are Llama's.
type Config struct {
	VocabSize, HiddenSize, IntermediateSize  int
	NumLayers, NumHeads, NumKVHeads, HeadDim int
	RopeTheta, RMSNormEps                    float64
	TieEmbeddings, AttentionBias, QKNorm     bool
	RopeScaling                              *Llama3RopeScaling // nil: plain RoPE
	// EmbedScale scales the embedding's rows by sqrt(HiddenSize) (arch.Desc.EmbedScale).
	EmbedScale bool
	// Activation is the MLP's gate activation (arch.Desc.Activation).
	Activation Activation
	// NormOffset: RMS norms scale by (NormOffset + weight), in float32 before the cast to the
	// compute dtype, where it is not 0 (arch.Desc.NormOffset: Gemma's 1).
	NormOffset float64
	// SandwichNorm: norms after attention and around the MLP too (arch.Desc.SandwichNorm).
	SandwichNorm bool
	// Sliding-window layers (arch.Desc.SlidingWindowPattern): layer i attends over the last
	// SlidingWindow tokens at RoPE base RopeLocalTheta unless (i+1) is a multiple of the
	// pattern (0 for architectures without them).
	SlidingWindowPattern int
	SlidingWindow        int
	RopeLocalTheta       float64
	// QueryScalar is query_pre_attn_scalar (Gemma 3's) where it is not head_dim: scores are
	// scaled by 1/sqrt(QueryScalar). 0: by 1/sqrt(head_dim).
	QueryScalar float64
}

// Llama3RopeScaling is rope_scaling with rope_type "llama3".
type Llama3RopeScaling struct {
	Factor, LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositions                  int
}

// ModelOptions say where and how a model lives.
type ModelOptions struct {
	// DType of the parameters: Float32 (default) or Float64 (gradient checks).
	DType DType
	// Precision is the compute type: the parameter dtype ("" or PrecisionF32), or
	// PrecisionBF16 over Float32 parameters (f32 masters, bf16 compute), on any device.
	Precision trainspec.Precision
	// ModelPlacement is the model's device (the zero value is the CPU), whether it
	// recomputes each layer in the backward pass instead of storing it, and whether a
	// trainable model keeps its AdamW moments in host memory (ZeRO-Offload's pattern).
	trainspec.ModelPlacement
	// Trainable models keep gradients and AdamW state.
	Trainable bool
	// LogitChunk is the number of rows per lm_head chunk. 0 picks one that holds about 16M
	// logits and lets a training pass keep up to 64M for its backward; a positive value
	// makes the backward recompute one chunk at a time; a negative value materialises all
	// logits at once (for comparisons).
	LogitChunk int
	// LoRA adds low-rank adapters and freezes the base (Rank 0: none).
	LoRA trainspec.LoRA
	// MomentShard makes a trainable model hold part Rank of World of its AdamW moments from
	// the start (Group.ShardOptimizer's cut), so they are never whole: an optimizer state
	// loaded from a checkpoint keeps this part. World 0 or 1: whole.
	MomentShard struct{ Rank, World int }
}

// Model is a transformer inside the plugin. Its methods are safe for concurrent use; they
// run one at a time on the runtime's worker thread.
type Model struct {
	rt   *Runtime
	ptr  *C.umad_model
	cfg  Config
	opts ModelOptions
}

// TensorInfo names one checkpoint tensor, its shape and storage dtype, and says whether
// it is a LoRA adapter (PEFT names: ...q_proj.lora_A.weight).
type TensorInfo struct {
	Name    string
	Shape   []int64
	DType   DType
	Adapter bool
}

// Trainable reports whether the model trains tensor ti: every tensor, or with LoRA the
// adapters only.
func (m *Model) Trainable(ti TensorInfo) bool {
	return m.opts.Trainable && (m.opts.LoRA.Rank == 0 || ti.Adapter)
}

func b2i(b bool) C.int32_t {
	if b {
		return 1
	}
	return 0
}

// NewModel creates a model with zero weights; set every tensor with SetTensor, then call
// Finalize. hfmodel.Load does all of that from a Hugging Face directory.
func (r *Runtime) NewModel(cfg Config, opts ModelOptions) (*Model, error) {
	compute, err := opts.computeDType()
	if err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	if err := opts.LoRA.Check(cfg.HiddenSize); err != nil {
		return nil, fmt.Errorf("new model: %w", err)
	}
	targets, _ := opts.LoRA.Mask()
	cc := C.umad_model_config{
		vocab_size:             C.int64_t(cfg.VocabSize),
		hidden_size:            C.int64_t(cfg.HiddenSize),
		intermediate_size:      C.int64_t(cfg.IntermediateSize),
		num_layers:             C.int64_t(cfg.NumLayers),
		num_heads:              C.int64_t(cfg.NumHeads),
		num_kv_heads:           C.int64_t(cfg.NumKVHeads),
		head_dim:               C.int64_t(cfg.HeadDim),
		rope_theta:             C.double(cfg.RopeTheta),
		rms_norm_eps:           C.double(cfg.RMSNormEps),
		tie_embeddings:         b2i(cfg.TieEmbeddings),
		attention_bias:         b2i(cfg.AttentionBias),
		qk_norm:                b2i(cfg.QKNorm),
		embed_scale:            b2i(cfg.EmbedScale),
		activation:             C.int32_t(cfg.Activation),
		norm_offset:            C.double(cfg.NormOffset),
		sandwich_norm:          b2i(cfg.SandwichNorm),
		dtype:                  C.int32_t(opts.DType),
		compute_dtype:          C.int32_t(compute),
		trainable:              b2i(opts.Trainable),
		grad_checkpoint:        b2i(opts.GradCheckpoint),
		lora_rank:              C.int32_t(opts.LoRA.Rank),
		lora_targets:           C.int32_t(targets),
		lora_alpha:             C.double(opts.LoRA.Alpha),
		lora_dropout:           C.double(opts.LoRA.Dropout),
		lora_seed:              C.uint64_t(opts.LoRA.Seed),
		base_bf16:              b2i(opts.LoRA.BaseBF16),
		sliding_window_pattern: C.int32_t(cfg.SlidingWindowPattern),
		sliding_window:         C.int64_t(cfg.SlidingWindow),
		rope_local_theta:       C.double(cfg.RopeLocalTheta),
		query_pre_attn_scalar:  C.double(cfg.QueryScalar),
		shard_rank:             C.int32_t(opts.MomentShard.Rank),
		shard_world:            C.int32_t(opts.MomentShard.World),
		offload_optimizer:      b2i(opts.Offload),
	}
	cc.device, cc.device_index = deviceCodes(opts.Device)
	if s := cfg.RopeScaling; s != nil {
		cc.rope_scaling_factor = C.double(s.Factor)
		cc.rope_low_freq_factor = C.double(s.LowFreqFactor)
		cc.rope_high_freq_factor = C.double(s.HighFreqFactor)
		cc.rope_original_max_positions = C.int64_t(s.OriginalMaxPositions)
	}
	m := &Model{rt: r, cfg: cfg, opts: opts}
	r.do(func() {
		m.ptr = C.plugin_model_create(&cc, r.errBuf, errBufLen)
		if m.ptr == nil {
			err = fmt.Errorf("new model: %s", C.GoString(r.errBuf))
		}
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

// Config is the architecture the model was created with.
func (m *Model) Config() Config { return m.cfg }

// Options are the options the model was created with.
func (m *Model) Options() ModelOptions { return m.opts }

// Free releases the model's memory; the model is unusable afterwards.
func (m *Model) Free() {
	if m.ptr == nil {
		return
	}
	m.rt.do(func() { C.plugin_model_free(m.ptr) })
	m.ptr = nil
}

func (m *Model) live(what string) error {
	if m.ptr == nil {
		return fmt.Errorf("%s: model was freed", what)
	}
	return nil
}

// SetTensor copies one Hugging Face tensor (raw little-endian bytes of dtype) into the
// model. The plugin reads data during the call only.
func (m *Model) SetTensor(name string, dtype DType, shape []int64, data []byte) error {
	if err := m.live("set tensor " + name); err != nil {
		return err
	}
	n := int64(dtype.Size())
	for _, d := range shape {
		n *= d
	}
	if int64(len(data)) != n || n == 0 {
		return fmt.Errorf("set tensor %s: %d bytes for shape %v of %d-byte elements", name, len(data), shape, dtype.Size())
	}
	var err error
	m.rt.do(func() {
		cname := C.CString(name)
		defer C.free(unsafe.Pointer(cname))
		var shp *C.int64_t
		if len(shape) > 0 {
			shp = (*C.int64_t)(unsafe.Pointer(&shape[0]))
		}
		rc := C.plugin_model_set_tensor(m.ptr, cname, C.int32_t(dtype), shp, C.int32_t(len(shape)),
			unsafe.Pointer(&data[0]), m.rt.errBuf, errBufLen)
		err = m.rt.check(rc, "set tensor")
	})
	return err
}

// Finalize checks that every tensor of the architecture was set (naming the missing ones)
// and makes the model usable.
func (m *Model) Finalize() error {
	if err := m.live("finalize"); err != nil {
		return err
	}
	var err error
	m.rt.do(func() { err = m.rt.check(C.plugin_model_finalize(m.ptr, m.rt.errBuf, errBufLen), "finalize model") })
	return err
}

// Clone copies the current weights into a new model with the given options (DType and
// Trainable are honoured; device, checkpointing and LoRA adapters follow m, and so does bf16
// compute over Float32 parameters).
func (m *Model) Clone(opts ModelOptions) (*Model, error) {
	if err := m.live("clone"); err != nil {
		return nil, err
	}
	opts.Device, opts.GradCheckpoint, opts.LoRA = m.opts.Device, m.opts.GradCheckpoint, m.opts.LoRA
	opts.MomentShard.Rank, opts.MomentShard.World = 0, 0 // the plugin's copy starts whole
	opts.Precision = ""
	if opts.DType == Float32 {
		opts.Precision = m.opts.Precision
	}
	if _, err := opts.computeDType(); err != nil {
		return nil, fmt.Errorf("clone: %w", err)
	}
	c := &Model{rt: m.rt, cfg: m.cfg, opts: opts}
	var err error
	m.rt.do(func() {
		c.ptr = C.plugin_model_clone(m.ptr, C.int32_t(opts.DType), b2i(opts.Trainable), m.rt.errBuf, errBufLen)
		if c.ptr == nil {
			err = fmt.Errorf("clone model: %s", C.GoString(m.rt.errBuf))
		}
	})
	if err != nil {
		return nil, err
	}
	return c, nil
}

// computeDType is the compute dtype the options ask for, checked against the parameters'.
func (o ModelOptions) computeDType() (DType, error) {
	if o.DType != Float32 && o.DType != Float64 {
		return 0, fmt.Errorf("parameter dtype must be Float32 or Float64, got %d", o.DType)
	}
	p, err := trainspec.ParsePrecision(string(o.Precision))
	if err != nil {
		return 0, err
	}
	if p == trainspec.PrecisionF32 {
		return o.DType, nil
	}
	if o.DType != Float32 {
		return 0, fmt.Errorf("bf16 compute needs Float32 master weights, got dtype %d", o.DType)
	}
	return BFloat16, nil
}

// Reference is a frozen copy of the current weights: the KL anchor of a training run.
func (m *Model) Reference() (*Model, error) {
	return m.Clone(ModelOptions{DType: m.opts.DType, LogitChunk: m.opts.LogitChunk})
}

// Tensors lists the model's tensors in checkpoint order (HF names).
func (m *Model) Tensors() ([]TensorInfo, error) {
	if err := m.live("tensors"); err != nil {
		return nil, err
	}
	var out []TensorInfo
	var err error
	m.rt.do(func() {
		n := int(C.plugin_model_tensor_count(m.ptr))
		name := (*C.char)(C.malloc(1024))
		defer C.free(unsafe.Pointer(name))
		var shape [4]C.int64_t
		var ndim, dtype, adapter C.int32_t
		for i := 0; i < n; i++ {
			if C.plugin_model_tensor_info(m.ptr, C.int32_t(i), name, 1024, &shape[0], &ndim, &dtype, &adapter) != C.UMAD_OK {
				err = fmt.Errorf("tensor info %d: plugin refused", i)
				return
			}
			ti := TensorInfo{Name: C.GoString(name), DType: DType(dtype), Adapter: adapter != 0}
			for d := 0; d < int(ndim); d++ {
				ti.Shape = append(ti.Shape, int64(shape[d]))
			}
			out = append(out, ti)
		}
	})
	return out, err
}

// Float is an element type Read and Write convert to and from.
type Float interface{ ~float32 | ~float64 }

func dtypeOf[T Float]() DType {
	var z T
	if unsafe.Sizeof(z) == 8 {
		return Float64
	}
	return Float32
}

// Read copies a tensor (weight, gradient or optimizer moment) out of the plugin into dst,
// converting to T; dst must have exactly the tensor's element count. A gradient that does
// not exist yet reads as zeros.
func Read[T Float](m *Model, name string, kind Kind, dst []T) error {
	return transfer(m, name, kind, dtypeOf[T](), unsafe.Pointer(unsafe.SliceData(dst)), len(dst)*int(unsafe.Sizeof(dst[0])), true)
}

// Write copies src into a tensor of the model; src must have exactly its element count.
func Write[T Float](m *Model, name string, kind Kind, src []T) error {
	return transfer(m, name, kind, dtypeOf[T](), unsafe.Pointer(unsafe.SliceData(src)), len(src)*int(unsafe.Sizeof(src[0])), false)
}

func transfer(m *Model, name string, kind Kind, dt DType, p unsafe.Pointer, nbytes int, read bool) error {
	if err := m.live("tensor " + name); err != nil {
		return err
	}
	if nbytes == 0 {
		return fmt.Errorf("tensor %s: empty buffer", name)
	}
	var err error
	m.rt.do(func() {
		cname := C.CString(name)
		defer C.free(unsafe.Pointer(cname))
		if read {
			err = m.rt.check(C.plugin_model_read(m.ptr, cname, C.int32_t(kind), C.int32_t(dt), p, C.int64_t(nbytes), m.rt.errBuf, errBufLen), "read tensor")
		} else {
			err = m.rt.check(C.plugin_model_write(m.ptr, cname, C.int32_t(kind), C.int32_t(dt), p, C.int64_t(nbytes), m.rt.errBuf, errBufLen), "write tensor")
		}
	})
	return err
}

// OptimizerState is the AdamW step counter and the number of skipped (non-finite) steps.
func (m *Model) OptimizerState() (step, skipped int64, err error) {
	if err := m.live("optimizer state"); err != nil {
		return 0, 0, err
	}
	m.rt.do(func() {
		var s, k C.int64_t
		if C.plugin_optim_get(m.ptr, &s, &k) != C.UMAD_OK {
			err = fmt.Errorf("optimizer state: plugin refused")
		}
		step, skipped = int64(s), int64(k)
	})
	return step, skipped, err
}

// SetOptimizerState restores the counters saved with a checkpoint.
func (m *Model) SetOptimizerState(step, skipped int64) error {
	if err := m.live("set optimizer state"); err != nil {
		return err
	}
	var err error
	m.rt.do(func() {
		if C.plugin_optim_set(m.ptr, C.int64_t(step), C.int64_t(skipped)) != C.UMAD_OK {
			err = fmt.Errorf("set optimizer state: step %d, skipped %d refused", step, skipped)
		}
	})
	return err
}
