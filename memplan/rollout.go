package memplan

// llama.cpp's memory: the GGUF weights, the KV cache of the slots and the compute buffers.

import (
	"fmt"

	"github.com/umad-dev/umad/internal/sysmem"
)

// ubatch is llama.cpp's micro-batch as the engine sets it (n_ubatch = min(n_batch, 512)).
const ubatch = 512

func (a Agent) rolloutLines() ([]Line, error) {
	s := a.Shape
	weights, err := s.GGUFBytes(a.RolloutType)
	if err != nil {
		return nil, err
	}
	// The engine asks for Slots x SeqContext cells with one stream per slot (engine.New).
	kv := int64(sysmem.KVCache{Layers: s.Layers, KVHeads: s.KVHeads, HeadK: s.HeadDim, HeadV: s.HeadDim,
		NCtx: a.Slots * a.seqContext(), Seqs: a.Slots, Type: a.KVType}.Bytes())
	H, I, V := int64(s.Hidden), int64(s.FFN), int64(s.Vocab)
	// The logits of every slot (output buffer and graph) and a prompt micro-batch's
	// widest intermediates: what a CPU run touches of the compute buffer, which is reserved
	// for a micro-batch's logits (ubatch x V) but only fills the rows it outputs. GPU memory
	// is taken whole.
	compute := 2*int64(a.Slots)*V*4 + ubatch*(3*I+4*H)*4
	dev := a.GPULayers > 0
	if dev {
		compute += ubatch * V * 4
	}
	lines := []Line{
		{Name: fmt.Sprintf("llama.cpp weights (%v)", a.RolloutType), Bytes: weights, Device: dev},
		{Name: fmt.Sprintf("KV cache (%d x %d, %s)", a.Slots, a.seqContext(), a.KVType), Bytes: kv, Device: dev},
		{Name: "llama.cpp compute", Bytes: compute, Device: dev},
	}
	switch {
	case a.FileSync:
		// A synced model (a LoRA run's merged weights too) is loaded before the previous one
		// is closed (trainer/sync.go).
		lines = append(lines, Line{Name: "sync: next llama.cpp model", Bytes: weights + kv + compute, Phases: []string{PhaseSync}, Device: dev})
	case a.lora():
		n, _ := a.trainable()
		lines[0].Bytes += 4 * n // the adapters (F32 LoRA GGUF) on the base, applied by llama.cpp
		// The next adapters are loaded before the previous ones are freed (Server.SetAdapter).
		lines = append(lines, Line{Name: "sync: next adapters", Bytes: 4 * n, Phases: []string{PhaseSync}, Device: dev})
	}
	return lines, nil
}
