package engine

import (
	"fmt"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/model"
	"github.com/umad-dev/umad/safetensors"
)

// UpdateWeights writes new weights into the loaded model, without a file: weights are
// named and shaped as in a Hugging Face checkpoint (what the trainer holds), and become
// the bytes the GGUF converter would write for them (model.WeightMap: GGUF names,
// Llama's q/k row order, the file's matrix type). Every weight of the model must be
// given; all are checked before any is written, so bad input leaves the model as it
// was. Afterwards no context of the model holds KV computed with the old weights. Not
// to be called while the engine serves.
func (s *Server) UpdateWeights(weights []safetensors.TensorView) error {
	if err := s.updateWeights(weights); err != nil {
		return fmt.Errorf("update weights of %s: %w", s.Path(), err)
	}
	return nil
}

func (s *Server) updateWeights(weights []safetensors.TensorView) error {
	if s.weights == nil {
		g, err := gguf.OpenGGUF(s.Path())
		if err != nil {
			return err
		}
		wm, err := model.WeightMapOf(g)
		g.Close()
		if err != nil {
			return err
		}
		s.weights = wm
	}
	given := map[string]int{}
	var want []llama.Weight
	var data []safetensors.TensorView
	for i, v := range weights {
		if s.weights.Ignored(v.Name) {
			continue
		}
		if j, dup := given[v.Name]; dup {
			return fmt.Errorf("tensor %q is given twice (%d and %d)", v.Name, j, i)
		}
		given[v.Name] = i
		w, err := s.weights.Check(v)
		if err != nil {
			return err
		}
		want = append(want, llama.Weight{Name: w.Name, Type: uint32(w.Type), Dims: w.Dims, Bytes: w.Bytes})
		data = append(data, v)
	}
	for _, name := range s.weights.HFNames() {
		if _, ok := given[name]; !ok {
			return fmt.Errorf("tensor %q is missing", name)
		}
	}
	return s.model.SetWeights(want, func(i int) ([]byte, error) { return s.weights.Bytes(data[i]) })
}
