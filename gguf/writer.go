package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/umad-dev/umad/internal/atomicfile"
)

// WriteFunc writes exactly a tensor's bytes. Writers take tensors as WriteFuncs so that a
// converter can stream a model that does not fit in memory; the byte count is checked.
type WriteFunc func(w io.Writer) error

// Bytes is the WriteFunc of tensor bytes already in memory.
func Bytes(b []byte) WriteFunc {
	return func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	}
}

// GGUFWriter collects metadata and tensors and writes a GGUF v3 file atomically on Close.
type GGUFWriter struct {
	path    string
	kvs     []KV
	keys    map[string]bool
	tensors []pendingTensor
	names   map[string]bool
}

type pendingTensor struct {
	info  TensorInfo
	write WriteFunc
}

// CreateGGUF starts a GGUF file at path. Nothing is written until Close.
func CreateGGUF(path string) (*GGUFWriter, error) {
	dir := filepath.Dir(path)
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("create gguf %s: %w", path, err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("create gguf %s: %s is not a directory", path, dir)
	}
	return &GGUFWriter{path: path, keys: map[string]bool{}, names: map[string]bool{}}, nil
}

// ggufTypeOf returns the GGUF type of a supported Go value, and for a slice its element type.
func ggufTypeOf(v any) (t, elem GGUFValueType, ok bool) {
	switch v.(type) {
	case uint8:
		return GGUFUint8, 0, true
	case int8:
		return GGUFInt8, 0, true
	case uint16:
		return GGUFUint16, 0, true
	case int16:
		return GGUFInt16, 0, true
	case uint32:
		return GGUFUint32, 0, true
	case int32:
		return GGUFInt32, 0, true
	case float32:
		return GGUFFloat32, 0, true
	case bool:
		return GGUFBool, 0, true
	case string:
		return GGUFString, 0, true
	case uint64:
		return GGUFUint64, 0, true
	case int64:
		return GGUFInt64, 0, true
	case float64:
		return GGUFFloat64, 0, true
	case []uint8:
		return GGUFArray, GGUFUint8, true
	case []int8:
		return GGUFArray, GGUFInt8, true
	case []uint16:
		return GGUFArray, GGUFUint16, true
	case []int16:
		return GGUFArray, GGUFInt16, true
	case []uint32:
		return GGUFArray, GGUFUint32, true
	case []int32:
		return GGUFArray, GGUFInt32, true
	case []float32:
		return GGUFArray, GGUFFloat32, true
	case []bool:
		return GGUFArray, GGUFBool, true
	case []string:
		return GGUFArray, GGUFString, true
	case []uint64:
		return GGUFArray, GGUFUint64, true
	case []int64:
		return GGUFArray, GGUFInt64, true
	case []float64:
		return GGUFArray, GGUFFloat64, true
	}
	return 0, 0, false
}

// AddKV adds a metadata pair; value must be one of the Go types listed on KV.
func (w *GGUFWriter) AddKV(key string, value any) error {
	if key == "" || len(key) > ggufMaxKeyLen {
		return fmt.Errorf("gguf key %q: length must be 1..%d", key, ggufMaxKeyLen)
	}
	if w.keys[key] {
		return fmt.Errorf("gguf key %q: added twice", key)
	}
	if _, _, ok := ggufTypeOf(value); !ok {
		return fmt.Errorf("gguf key %q: unsupported value type %T", key, value)
	}
	if key == ggufAlignmentKey {
		a, ok := value.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf key %q: must be a uint32 power of two, got %v (%T)", key, value, value)
		}
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: value})
	return nil
}

// AddTensor adds a tensor held in memory; dims are in ggml order (innermost first).
func (w *GGUFWriter) AddTensor(name string, t GGMLType, dims []int64, data []byte) error {
	return w.AddTensorFunc(name, t, dims, Bytes(data))
}

// AddTensorFunc adds a tensor whose bytes are produced by write during Close.
func (w *GGUFWriter) AddTensorFunc(name string, t GGMLType, dims []int64, write WriteFunc) error {
	if name == "" || len(name) > ggufMaxTensorName {
		return fmt.Errorf("gguf tensor %q: name length must be 1..%d", name, ggufMaxTensorName)
	}
	if w.names[name] {
		return fmt.Errorf("gguf tensor %q: added twice", name)
	}
	if len(dims) > ggufMaxDims {
		return fmt.Errorf("gguf tensor %q: %d dims, at most %d", name, len(dims), ggufMaxDims)
	}
	size, err := TensorBytes(t, dims)
	if err != nil {
		return fmt.Errorf("gguf tensor %q: %w", name, err)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, pendingTensor{
		info:  TensorInfo{Name: name, Type: t, Dims: append([]int64(nil), dims...), Size: size},
		write: write,
	})
	return nil
}

// Close writes the file: header, metadata, tensor infos, then each tensor's data padded to
// the alignment. The file appears at its path only if everything succeeded.
func (w *GGUFWriter) Close() error {
	align := int64(ggufDefaultAlignment)
	if !w.keys[ggufAlignmentKey] {
		w.kvs = append(w.kvs, KV{Key: ggufAlignmentKey, Value: uint32(align)})
		w.keys[ggufAlignmentKey] = true
	}
	for _, kv := range w.kvs {
		if kv.Key == ggufAlignmentKey {
			align = int64(kv.Value.(uint32))
		}
	}
	var off int64
	for i := range w.tensors {
		w.tensors[i].info.Offset = off
		off = alignUp(off+w.tensors[i].info.Size, align)
	}
	return atomicfile.Write(w.path, func(bw io.Writer) error {
		cw := &CountingWriter{W: bw}
		enc := &ggufEncoder{w: cw}
		enc.raw([]byte(ggufMagic))
		enc.u32(ggufVersion)
		enc.u64(uint64(len(w.tensors)))
		enc.u64(uint64(len(w.kvs)))
		for _, kv := range w.kvs {
			enc.str(kv.Key)
			enc.value(kv.Value)
		}
		for _, t := range w.tensors {
			enc.str(t.info.Name)
			enc.u32(uint32(len(t.info.Dims)))
			for _, d := range t.info.Dims {
				enc.u64(uint64(d))
			}
			enc.u32(uint32(t.info.Type))
			enc.u64(uint64(t.info.Offset))
		}
		if enc.err != nil {
			return enc.err
		}
		dataStart := alignUp(cw.N, align)
		if err := pad(cw, dataStart); err != nil {
			return err
		}
		for _, t := range w.tensors {
			before := cw.N
			if err := t.write(cw); err != nil {
				return fmt.Errorf("tensor %q: %w", t.info.Name, err)
			}
			if got := cw.N - before; got != t.info.Size {
				return fmt.Errorf("tensor %q: wrote %d bytes, its type and dims need %d", t.info.Name, got, t.info.Size)
			}
			if err := pad(cw, dataStart+alignUp(t.info.Offset+t.info.Size, align)); err != nil {
				return err
			}
		}
		return nil
	})
}

// CountingWriter counts the bytes written through it to W.
type CountingWriter struct {
	W io.Writer
	N int64
}

func (c *CountingWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}

func pad(cw *CountingWriter, to int64) error {
	_, err := cw.Write(make([]byte, to-cw.N))
	return err
}

// ggufEncoder writes little-endian GGUF values, keeping the first error.
type ggufEncoder struct {
	w   io.Writer
	err error
	buf [8]byte
}

func (e *ggufEncoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *ggufEncoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:], v)
	e.raw(e.buf[:4])
}

func (e *ggufEncoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:], v)
	e.raw(e.buf[:8])
}

func (e *ggufEncoder) str(s string) {
	e.u64(uint64(len(s)))
	e.raw([]byte(s))
}

func (e *ggufEncoder) value(v any) {
	t, elem, _ := ggufTypeOf(v) // AddKV accepted only supported types
	e.u32(uint32(t))
	if t != GGUFArray {
		e.scalar(v)
		return
	}
	e.u32(uint32(elem))
	switch a := v.(type) {
	case []uint8:
		e.u64(uint64(len(a)))
		e.raw(a)
	case []string:
		e.u64(uint64(len(a)))
		for _, s := range a {
			e.str(s)
		}
	default:
		writeArray(e, a)
	}
}

func writeArray(e *ggufEncoder, v any) {
	switch a := v.(type) {
	case []int8:
		eachScalar(e, a)
	case []uint16:
		eachScalar(e, a)
	case []int16:
		eachScalar(e, a)
	case []uint32:
		eachScalar(e, a)
	case []int32:
		eachScalar(e, a)
	case []float32:
		eachScalar(e, a)
	case []bool:
		eachScalar(e, a)
	case []uint64:
		eachScalar(e, a)
	case []int64:
		eachScalar(e, a)
	case []float64:
		eachScalar(e, a)
	default:
		e.err = errors.Join(e.err, fmt.Errorf("unsupported array type %T", v))
	}
}

func eachScalar[T any](e *ggufEncoder, a []T) {
	e.u64(uint64(len(a)))
	for _, x := range a {
		e.scalar(x)
	}
}

func (e *ggufEncoder) scalar(v any) {
	switch x := v.(type) {
	case uint8:
		e.raw([]byte{x})
	case int8:
		e.raw([]byte{byte(x)})
	case bool:
		b := byte(0)
		if x {
			b = 1
		}
		e.raw([]byte{b})
	case uint16:
		e.raw(binary.LittleEndian.AppendUint16(e.buf[:0], x))
	case int16:
		e.raw(binary.LittleEndian.AppendUint16(e.buf[:0], uint16(x)))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	case string:
		e.str(x)
	}
}
