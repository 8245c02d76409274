package model

import (
	"path/filepath"
	"testing"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/safetensors"
)

// GGUFBytes is what the converter writes: the tensor data of real GGUF files of each
// architecture (Llama adds rope_freqs) at F32 and Q8_0, and Params matches the checkpoint.
func TestGGUFBytesMatchConvertedFiles(t *testing.T) {
	for _, arch := range arch.Names() {
		dir := writeTinyForTest(t, arch)
		hf := filepath.Join(dir, "hf")
		cfg, err := LoadHFConfig(hf)
		if err != nil {
			t.Fatal(err)
		}
		s, err := cfg.Shape()
		if err != nil {
			t.Fatal(err)
		}
		st, err := safetensors.Open(hf)
		if err != nil {
			t.Fatal(err)
		}
		var elems int64
		for _, name := range st.Names() {
			v, err := st.Tensor(name)
			if err != nil {
				t.Fatal(err)
			}
			elems += int64(len(v.Data) / 4) // the tiny checkpoints are F32
		}
		st.Close()
		if elems != s.Params() {
			t.Errorf("%s: Params %d, the checkpoint holds %d", arch, s.Params(), elems)
		}
		for _, typ := range []gguf.GGMLType{gguf.TypeF32, gguf.TypeQ8_0} {
			out := filepath.Join(t.TempDir(), "m.gguf")
			if err := HFToGGUF(hf, out, HFToGGUFOptions{Type: typ}); err != nil {
				t.Fatal(err)
			}
			g, err := gguf.OpenGGUF(out)
			if err != nil {
				t.Fatal(err)
			}
			var got int64
			for _, ti := range g.Tensors {
				got += ti.Size
			}
			g.Close()
			want, err := s.GGUFBytes(typ)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("%s at %v: GGUFBytes %d, the file's tensors %d", arch, typ, want, got)
			}
		}
	}
}
