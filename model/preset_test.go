package model

import (
	"testing"

	"github.com/umad-dev/umad/gguf"
)

// The presets must be the real checkpoints' shapes: their parameter counts are the ones the
// model cards publish (tied embeddings counted once).
func TestPresetsMatchPublishedParameterCounts(t *testing.T) {
	published := map[string]int64{
		"qwen2.5-0.5b": 494_032_768,
		"qwen2.5-3b":   3_085_938_688,
		"qwen3-4b":     4_022_468_096,
		"gemma-3-1b":   999_885_952,
	}
	for name, s := range Presets {
		want, ok := published[name]
		if !ok {
			t.Errorf("preset %s has no published parameter count in this test", name)
			continue
		}
		if err := s.Validate(); err != nil {
			t.Errorf("preset %s: %v", name, err)
		}
		n := s.Params()
		if n != want {
			t.Errorf("preset %s has %d parameters, the published model %d", name, n, want)
		}
	}
}

// A token multiplies every matrix once: Qwen2.5-0.5B's 24 layers of attention and MLP plus
// the lm_head (its embedding table, tied), and decoding reads them all at the rollout type.
// Untied, the embedding table is a lookup, neither multiplied nor read whole.
func TestMatmulParamsAndDecodeBytes(t *testing.T) {
	s := Presets["qwen2.5-0.5b"]
	layer := int64(896*896*2 + 896*128*2 + 896*4864*3) // q and o, k and v (2 KV heads of 64), gate, up and down
	lmHead := int64(151936 * 896)
	if n := s.MatmulParams(); n != 24*layer+lmHead {
		t.Errorf("tied: %d matrix weights, want %d", n, 24*layer+lmHead)
	}
	all, err := s.GGUFBytes(gguf.TypeBF16)
	if b, derr := s.DecodeBytes(gguf.TypeBF16); err != nil || derr != nil || b != all {
		t.Errorf("tied: decode reads %d bytes (%v), want the whole GGUF's %d (%v)", b, derr, all, err)
	}
	s.TiedEmbeddings = false // an lm_head of its own
	if n := s.MatmulParams(); n != 24*layer+lmHead {
		t.Errorf("untied: %d matrix weights, want %d", n, 24*layer+lmHead)
	}
	all, err = s.GGUFBytes(gguf.TypeF32)
	if b, derr := s.DecodeBytes(gguf.TypeF32); err != nil || derr != nil || b != all-4*lmHead {
		t.Errorf("untied: decode reads %d bytes (%v), want the GGUF's %d less the table's %d", b, derr, all, 4*lmHead)
	}
}

// The presets' names, as the help texts list them, are sorted.
func TestPresetNames(t *testing.T) {
	if got, want := PresetNames(), "gemma-3-1b, qwen2.5-0.5b, qwen2.5-3b, qwen3-4b"; got != want {
		t.Errorf("PresetNames() = %q, want %q", got, want)
	}
}
