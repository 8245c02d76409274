package engine

import "github.com/umad-dev/umad/cgo/llama"

// The settings callers give the engine, in the engine's own types: converted to the
// binding's here, so no caller outside engine and bench needs cgo/llama.

// KVType is the storage type of the KV cache. F32 is exact; F16 (llama.cpp's default)
// and Q8_0 move log-probs by about 1e-3 (docs/ARCHITECTURE.md section 4).
type KVType string

// The KV-cache types; "" is F16.
const (
	KVF16  KVType = KVType(llama.KVF16)
	KVF32  KVType = KVType(llama.KVF32)
	KVQ8_0 KVType = KVType(llama.KVQ8_0)
)

// ParseKVType parses f16, f32 or q8_0.
func ParseKVType(s string) (KVType, error) {
	t, err := llama.ParseKVType(s)
	return KVType(t), err
}

// FlashAttn selects llama.cpp's flash-attention path.
type FlashAttn string

// The flash-attention settings; "" is auto.
const (
	FlashAuto FlashAttn = FlashAttn(llama.FlashAuto)
	FlashOn   FlashAttn = FlashAttn(llama.FlashOn)
	FlashOff  FlashAttn = FlashAttn(llama.FlashOff)
)

// ParseFlashAttn parses auto, on or off.
func ParseFlashAttn(s string) (FlashAttn, error) {
	f, err := llama.ParseFlashAttn(s)
	return FlashAttn(f), err
}

// ModelParams configures loading a GGUF file.
type ModelParams struct {
	// GPULayers is the number of layers to offload to a GPU backend (0 = CPU only).
	GPULayers int
	// Devices names the GPUs the offloaded layers are split over, as ggml names them
	// ("CUDA0", "CUDA1"; see Devices); empty means all of them.
	Devices []string
	// VocabOnly loads the tokenizer without the weights.
	VocabOnly bool
	// NoMmap reads the weights into memory instead of mapping the file.
	NoMmap bool
}

// ScorerParams size a Scorer's context.
type ScorerParams struct {
	NCtx      int // KV cells to start with; grows as longer sequences come
	NBatch    int // most tokens one decode carries (default 512)
	Threads   int // 0 = physical cores
	KVType    KVType
	FlashAttn FlashAttn
}

// context is p as the binding's parameters of a one-sequence context.
func (p ScorerParams) context() llama.ContextParams {
	return llama.ContextParams{NCtx: p.NCtx, NBatch: p.NBatch, NSeqMax: 1, Threads: p.Threads,
		KVType: llama.KVType(p.KVType), FlashAttn: llama.FlashAttn(p.FlashAttn)}
}
