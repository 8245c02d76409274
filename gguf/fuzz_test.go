package gguf

import (
	"bytes"
	"testing"
)

// FuzzOpenGGUF: any input is either rejected with an error or yields tensors that lie inside
// the input and can be read; never a panic, and never an allocation larger than the input
// implies (the readers check sizes against it first).
func FuzzOpenGGUF(f *testing.F) {
	f.Add(smallGGUF(f))
	f.Add(ggufHeader(3, 0, 0))
	f.Add(ggufHeader(3, 0, 1, gstr("k"), u32le(uint32(GGUFArray)), u32le(uint32(GGUFString)), u64le(2), gstr("a"), gstr("b")))
	f.Add(ggufHeader(3, 1, 0, gstr("t"), u32le(2), u64le(32), u64le(1), u32le(uint32(TypeQ8_0)), u64le(0), make([]byte, 64)))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := parseGGUF(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, ti := range g.Tensors {
			if g.DataOffset+ti.Offset+ti.Size > int64(len(data)) {
				t.Fatalf("tensor %q (%d bytes at %d) passes the end of a %d-byte input", ti.Name, ti.Size, g.DataOffset+ti.Offset, len(data))
			}
			if _, raw, err := g.ReadTensor(ti.Name); err != nil || int64(len(raw)) != ti.Size {
				t.Fatalf("tensor %q: read %d bytes, %v; want %d", ti.Name, len(raw), err, ti.Size)
			}
			g.ReadTensorF32(ti.Name) // may refuse a type it cannot convert, must not panic
		}
	})
}
