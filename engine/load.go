package engine

import (
	"fmt"
	"slices"
	"strings"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/gguf"
)

// Architectures are the model architectures umad supports: the registry's.
var Architectures = arch.Names()

// LoadModel checks a GGUF file with umad's own reader first (so a missing, truncated or
// foreign file, or an unsupported architecture, gets a precise error instead of
// llama.cpp's generic one), then loads it with llama.cpp.
func LoadModel(path string, p ModelParams) (*Model, error) {
	g, err := gguf.OpenGGUF(path)
	if err != nil {
		return nil, fmt.Errorf("load model: %w", err)
	}
	name, err := g.String("general.architecture")
	g.Close()
	if err != nil {
		return nil, fmt.Errorf("load model %s: %w", path, err)
	}
	if !slices.Contains(Architectures, name) {
		return nil, fmt.Errorf("load model %s: unsupported architecture %q (supported: %s)", path, name, strings.Join(Architectures, ", "))
	}
	m, err := llama.LoadModel(path, llama.ModelParams(p))
	if err != nil {
		return nil, err
	}
	return &Model{m}, nil
}
