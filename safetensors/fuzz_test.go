package safetensors

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// FuzzOpenSafetensors: the same contract for safetensors headers.
func FuzzOpenSafetensors(f *testing.F) {
	tensors, _ := stTestTensors(f)
	path := filepath.Join(f.TempDir(), "seed.safetensors")
	if err := Write(path, tensors, map[string]string{"format": "pt"}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Add(stFileBytes(`{"a":{"dtype":"BF16","shape":[],"data_offsets":[0,2]}}`, []byte{1, 2}))
	f.Add(stFileBytes(`{"__metadata__":{"k":"v"}}`, nil))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := parseSafetensors(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		s := singleFile(file)
		for _, name := range s.Names() {
			tv, err := s.Tensor(name)
			if err != nil {
				t.Fatalf("tensor %q passed validation but cannot be read: %v", name, err)
			}
			if want, _ := TensorBytes(tv.Shape, dtypeBytes[tv.DType]); want != int64(len(tv.Data)) {
				t.Fatalf("tensor %q: %d bytes for shape %v of %s", name, len(tv.Data), tv.Shape, tv.DType)
			}
			tv.F32() // may refuse a dtype, must not panic
		}
	})
}
