package model

import "testing"

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
