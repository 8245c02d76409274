package llama

/*
#cgo CXXFLAGS: -std=c++17
#include <stdlib.h>
#include "llama.h"
int umad_weight_info(const struct llama_model *m, const char *name, int32_t *type, int64_t *ne, size_t *nbytes);
int umad_weight_set(struct llama_model *m, const char *name, const void *data, size_t size);
int umad_weight_get(const struct llama_model *m, const char *name, void *data, size_t size);
*/
import "C"

import (
	"errors"
	"fmt"
	"slices"
	"unsafe"
)

// Weight describes a weight tensor of a loaded model as llama.cpp holds it.
type Weight struct {
	Name  string
	Type  uint32  // ggml_type
	Dims  []int64 // ggml order, innermost first
	Bytes int64
}

// Weight returns the weight of that name (a GGUF tensor name such as "blk.0.attn_q.weight").
func (m *Model) Weight(name string) (Weight, error) {
	if err := m.lock(); err != nil {
		return Weight{}, err
	}
	defer m.mu.Unlock()
	return m.weightLocked(name)
}

func (m *Model) weightLocked(name string) (Weight, error) {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var typ C.int32_t
	var ne [4]C.int64_t
	var nbytes C.size_t
	switch n := C.umad_weight_info(m.m, cname, &typ, &ne[0], &nbytes); {
	case n == 0:
		return Weight{}, fmt.Errorf("weight %q: the model has no such tensor", name)
	case n < 0:
		return Weight{}, fmt.Errorf("weight %q: the model holds copies of different types or shapes", name)
	}
	w := Weight{Name: name, Type: uint32(typ), Bytes: int64(nbytes)}
	for d := range ne {
		w.Dims = append(w.Dims, int64(ne[d]))
	}
	w.Dims = trimDims(w.Dims)
	return w, nil
}

// trimDims drops trailing dims of 1: ggml pads every tensor to four dims, a GGUF lists
// only the tensor's own (which may end in 1s too).
func trimDims(d []int64) []int64 {
	for len(d) > 1 && d[len(d)-1] == 1 {
		d = d[:len(d)-1]
	}
	return d
}

// ErrMmapWeights is returned by SetWeights on a model loaded with mmap.
var ErrMmapWeights = errors.New("the model's weights are mapped read-only from its file: load it with NoMmap to write them")

// SetWeights writes new data into weights of the loaded model: data(i) gives the bytes of
// want[i], in llama.cpp's layout and type. Every weight is first checked against the model
// (name, type, dims, byte size), so a mismatch writes nothing. The data goes through
// ggml's backend interface, to device memory for offloaded layers. No context of the model
// decodes meanwhile, and afterwards every one has its KV memory cleared: it was computed
// with the old weights. An error from data leaves the weights before it written; data
// runs under the model's lock and must not call the model.
func (m *Model) SetWeights(want []Weight, data func(i int) ([]byte, error)) error {
	if err := m.lock(); err != nil {
		return err
	}
	defer m.mu.Unlock()
	if m.mmap {
		return fmt.Errorf("set weights: %w", ErrMmapWeights)
	}
	for _, w := range want {
		have, err := m.weightLocked(w.Name)
		if err != nil {
			return fmt.Errorf("set weights: %w", err)
		}
		if have.Type != w.Type || !slices.Equal(have.Dims, trimDims(w.Dims)) || have.Bytes != w.Bytes {
			return fmt.Errorf("set weights: %q is %s, dims %v, %d bytes in the model; the new data is %s, dims %v, %d bytes",
				w.Name, typeName(have.Type), have.Dims, have.Bytes, typeName(w.Type), w.Dims, w.Bytes)
		}
	}
	// Hold every context's lock: none may decode on half-written weights.
	var ctxs []*Context
	for c := range m.contexts {
		c.mu.Lock()
		ctxs = append(ctxs, c)
	}
	// Emptying the cells is enough: llama.cpp masks free cells out of attention (and leaves
	// the data of removed ones in place too); zeroing a large cache costs as much as the weights.
	defer func() {
		for _, c := range ctxs {
			if c.c != nil {
				C.llama_memory_clear(C.llama_get_memory(c.c), C.bool(false))
			}
			c.mu.Unlock()
		}
	}()
	for i, w := range want {
		b, err := data(i)
		if err != nil {
			return fmt.Errorf("set weights: %s: %w", w.Name, err)
		}
		if int64(len(b)) != w.Bytes {
			return fmt.Errorf("set weights: %s: got %d bytes, want %d", w.Name, len(b), w.Bytes)
		}
		if err := setWeight(m.m, w.Name, b); err != nil {
			return fmt.Errorf("set weights: %w", err)
		}
	}
	return nil
}

// typeName is ggml's name of a type (f32, q8_0).
func typeName(t uint32) string {
	if t >= uint32(C.GGML_TYPE_COUNT) {
		return fmt.Sprintf("ggml type %d", t)
	}
	return C.GoString(C.ggml_type_name(C.enum_ggml_type(t)))
}

func setWeight(m *C.struct_llama_model, name string, b []byte) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.umad_weight_set(m, cname, unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b))) < 1 {
		return fmt.Errorf("%s: a copy of it has no memory to write (a model loaded without weights?)", name)
	}
	return nil
}

// ReadWeight copies a weight's bytes out of the model (from the device for offloaded
// layers), in llama.cpp's layout and type.
func (m *Model) ReadWeight(name string) ([]byte, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock()
	w, err := m.weightLocked(name)
	if err != nil {
		return nil, fmt.Errorf("read weight: %w", err)
	}
	b := make([]byte, w.Bytes)
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	if C.umad_weight_get(m.m, cname, unsafe.Pointer(unsafe.SliceData(b)), C.size_t(len(b))) != 1 {
		return nil, fmt.Errorf("read weight %q: its buffer cannot be read back (a CPU buffer that repacks weights?)", name)
	}
	return b, nil
}
