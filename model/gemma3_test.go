package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Gemma 3's config.json leaves tie_word_embeddings out, which transformers reads as tied;
// for the others the absent key keeps meaning untied.
func TestConfigWithoutTieKeyTakesTheArchDefault(t *testing.T) {
	for _, c := range []struct {
		arch string
		want bool
	}{{"gemma3", true}, {"llama", false}} {
		dir := filepath.Join(writeTestTiny(t, c.arch, TinyOptions{Seed: 1}), "hf")
		path := filepath.Join(dir, "config.json")
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(raw, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "tie_word_embeddings")
		if raw, err = json.Marshal(m); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, raw, 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := LoadHFConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.TieWordEmbeddings != c.want {
			t.Errorf("%s without tie_word_embeddings: tied %v, want %v", c.arch, cfg.TieWordEmbeddings, c.want)
		}
	}
}

// A Gemma 3 shape without a global layer (fewer layers than the pattern) is refused: llama.cpp
// aborted decoding it (`model tiny --preset gemma-3-1b --layers 1`).
func TestGemma3NeedsAGlobalLayer(t *testing.T) {
	s := Presets["gemma-3-1b"]
	s.Layers = 5
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "at least 6 layers") {
		t.Errorf("gemma3 with 5 layers: %v", err)
	}
	s.Layers = 6
	if err := s.Validate(); err != nil {
		t.Errorf("gemma3 with 6 layers: %v", err)
	}
}

// editConfig rewrites dir/config.json through edit.
func editConfig(t *testing.T, dir string, edit func(map[string]any)) {
	t.Helper()
	path := filepath.Join(dir, "config.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	if raw, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Issue 44: an embedding-style Gemma 3 config (use_bidirectional_attention) ran as causal,
// and a layer_types list longer than num_hidden_layers passed hf2gguf; both are refused,
// by the config's shape and by the conversion.
func TestGemma3ConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		edit func(map[string]any)
		want string
	}{
		{func(m map[string]any) { m["use_bidirectional_attention"] = true }, "use_bidirectional_attention"},
		{func(m map[string]any) {
			m["layer_types"] = append(m["layer_types"].([]any), "sliding_attention")
		}, "layer_types lists 7 layers, num_hidden_layers is 6"},
	} {
		dir := filepath.Join(writeTestTiny(t, "gemma3", TinyOptions{Seed: 1}), "hf")
		editConfig(t, dir, c.edit)
		cfg, err := LoadHFConfig(dir)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := cfg.Shape(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Shape: %v, want %q", err, c.want)
		}
		if err := HFToGGUF(dir, filepath.Join(t.TempDir(), "m.gguf"), HFToGGUFOptions{}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("HFToGGUF: %v, want %q", err, c.want)
		}
	}
}
