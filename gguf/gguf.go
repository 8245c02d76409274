// Package gguf reads and writes llama.cpp's GGUF files (metadata, tensor infos, aligned
// tensor data) and converts between ggml's tensor types (F32, F16, BF16, Q8_0 and the
// half-precision floats). The reader treats every file as untrusted: each count, length and
// offset is checked against the file size before anything is allocated.
package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
)

// GGUFValueType is the type tag of a GGUF metadata value (gguf_type).
type GGUFValueType uint32

// GGUF metadata value types.
const (
	GGUFUint8   GGUFValueType = 0
	GGUFInt8    GGUFValueType = 1
	GGUFUint16  GGUFValueType = 2
	GGUFInt16   GGUFValueType = 3
	GGUFUint32  GGUFValueType = 4
	GGUFInt32   GGUFValueType = 5
	GGUFFloat32 GGUFValueType = 6
	GGUFBool    GGUFValueType = 7
	GGUFString  GGUFValueType = 8
	GGUFArray   GGUFValueType = 9
	GGUFUint64  GGUFValueType = 10
	GGUFInt64   GGUFValueType = 11
	GGUFFloat64 GGUFValueType = 12
)

const (
	ggufMagic            = "GGUF"
	ggufVersion          = 3
	ggufDefaultAlignment = 32
	ggufMaxDims          = 4  // GGML_MAX_DIMS
	ggufMaxTensorName    = 63 // GGML_MAX_NAME minus the terminating NUL
	ggufMaxKeyLen        = 1 << 16
	ggufAlignmentKey     = "general.alignment"
)

// fixedSize is the encoded size of each fixed-size value type.
var fixedSize = map[GGUFValueType]int64{
	GGUFUint8: 1, GGUFInt8: 1, GGUFBool: 1,
	GGUFUint16: 2, GGUFInt16: 2,
	GGUFUint32: 4, GGUFInt32: 4, GGUFFloat32: 4,
	GGUFUint64: 8, GGUFInt64: 8, GGUFFloat64: 8,
}

// KV is one metadata pair. Value holds the Go type of the GGUF type: uint8, int8, uint16,
// int16, uint32, int32, float32, bool, string, uint64, int64, float64, or a slice of one of
// those for an array.
type KV struct {
	Key   string
	Value any
}

// TensorInfo describes one tensor. Dims are in ggml order (innermost first), the reverse of
// the PyTorch shape; Offset is relative to the start of the data section.
type TensorInfo struct {
	Name   string
	Type   GGMLType
	Dims   []int64
	Offset int64
	Size   int64
}

// GGUF is an open GGUF file: its metadata is in memory, tensor data is read on demand.
type GGUF struct {
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	Alignment  int64
	DataOffset int64 // absolute file offset of the data section

	r       io.ReaderAt
	closer  io.Closer
	kvIndex map[string]int
	tIndex  map[string]int
}

// OpenGGUF opens and validates a GGUF file. Close it when done.
func OpenGGUF(path string) (*GGUF, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open gguf: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open gguf: %w", err)
	}
	g, err := parseGGUF(f, st.Size())
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("open gguf %s: %w", path, err)
	}
	g.closer = f
	return g, nil
}

// Close releases the file.
func (g *GGUF) Close() error {
	if g.closer == nil {
		return nil
	}
	return g.closer.Close()
}

// ggufReader reads little-endian values sequentially and knows how many bytes are left, so
// every length can be checked before it is allocated.
type ggufReader struct {
	br     *bufio.Reader
	pos    int64
	size   int64
	scalar [8]byte
}

func (r *ggufReader) remaining() int64 { return r.size - r.pos }

func (r *ggufReader) read(n int64) ([]byte, error) {
	if n > r.remaining() {
		return nil, fmt.Errorf("need %d bytes at offset %d, file has %d: %w", n, r.pos, r.size, io.ErrUnexpectedEOF)
	}
	var buf []byte
	if n <= int64(len(r.scalar)) {
		buf = r.scalar[:n]
	} else {
		buf = make([]byte, n)
	}
	if _, err := io.ReadFull(r.br, buf); err != nil {
		return nil, fmt.Errorf("read at offset %d: %w", r.pos, err)
	}
	r.pos += n
	return buf, nil
}

func (r *ggufReader) u32() (uint32, error) {
	b, err := r.read(4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *ggufReader) u64() (uint64, error) {
	b, err := r.read(8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

// count reads a u64 element count and checks that count elements of at least minBytes each
// fit in the rest of the file.
func (r *ggufReader) count(minBytes int64) (int64, error) {
	n, err := r.u64()
	if err != nil {
		return 0, err
	}
	if n > uint64(r.remaining()/minBytes) {
		return 0, fmt.Errorf("count %d at offset %d cannot fit in the %d bytes left", n, r.pos-8, r.remaining())
	}
	return int64(n), nil
}

func (r *ggufReader) str(maxLen int64) (string, error) {
	n, err := r.count(1)
	if err != nil {
		return "", fmt.Errorf("string length: %w", err)
	}
	if n > maxLen {
		return "", fmt.Errorf("string of %d bytes exceeds the limit of %d", n, maxLen)
	}
	b, err := r.read(n)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// scalarValue decodes one fixed-size value.
func scalarValue(t GGUFValueType, b []byte) any {
	switch t {
	case GGUFUint8:
		return b[0]
	case GGUFInt8:
		return int8(b[0])
	case GGUFBool:
		return b[0] != 0
	case GGUFUint16:
		return binary.LittleEndian.Uint16(b)
	case GGUFInt16:
		return int16(binary.LittleEndian.Uint16(b))
	case GGUFUint32:
		return binary.LittleEndian.Uint32(b)
	case GGUFInt32:
		return int32(binary.LittleEndian.Uint32(b))
	case GGUFFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b))
	case GGUFUint64:
		return binary.LittleEndian.Uint64(b)
	case GGUFInt64:
		return int64(binary.LittleEndian.Uint64(b))
	default: // GGUFFloat64; callers only pass types in fixedSize
		return math.Float64frombits(binary.LittleEndian.Uint64(b))
	}
}

func (r *ggufReader) value(t GGUFValueType) (any, error) {
	if t == GGUFString {
		return r.str(r.remaining())
	}
	if t == GGUFArray {
		return r.array()
	}
	size, ok := fixedSize[t]
	if !ok {
		return nil, fmt.Errorf("unknown value type %d", t)
	}
	b, err := r.read(size)
	if err != nil {
		return nil, err
	}
	return scalarValue(t, b), nil
}

func (r *ggufReader) array() (any, error) {
	et, err := r.u32()
	if err != nil {
		return nil, fmt.Errorf("array element type: %w", err)
	}
	t := GGUFValueType(et)
	if t == GGUFString {
		n, err := r.count(8) // each string has at least its 8-byte length
		if err != nil {
			return nil, fmt.Errorf("array of strings: %w", err)
		}
		out := make([]string, n)
		for i := range out {
			if out[i], err = r.str(r.remaining()); err != nil {
				return nil, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		return out, nil
	}
	if t == GGUFArray {
		return nil, errors.New("nested arrays are not supported")
	}
	size, ok := fixedSize[t]
	if !ok {
		return nil, fmt.Errorf("unknown array element type %d", et)
	}
	n, err := r.count(size)
	if err != nil {
		return nil, fmt.Errorf("array of %d-byte values: %w", size, err)
	}
	raw, err := r.read(n * size)
	if err != nil {
		return nil, err
	}
	return decodeArray(t, raw, int(n)), nil
}

func decodeArray(t GGUFValueType, raw []byte, n int) any {
	size := int(fixedSize[t])
	switch t {
	case GGUFUint8:
		return append([]uint8(nil), raw...)
	case GGUFInt8:
		return fillArray[int8](t, raw, n, size)
	case GGUFBool:
		return fillArray[bool](t, raw, n, size)
	case GGUFUint16:
		return fillArray[uint16](t, raw, n, size)
	case GGUFInt16:
		return fillArray[int16](t, raw, n, size)
	case GGUFUint32:
		return fillArray[uint32](t, raw, n, size)
	case GGUFInt32:
		return fillArray[int32](t, raw, n, size)
	case GGUFFloat32:
		return fillArray[float32](t, raw, n, size)
	case GGUFUint64:
		return fillArray[uint64](t, raw, n, size)
	case GGUFInt64:
		return fillArray[int64](t, raw, n, size)
	default:
		return fillArray[float64](t, raw, n, size)
	}
}

func fillArray[T any](t GGUFValueType, raw []byte, n, size int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = scalarValue(t, raw[i*size:]).(T)
	}
	return out
}

// parseGGUF reads and validates the header, metadata and tensor infos of a GGUF image of the
// given size.
func parseGGUF(ra io.ReaderAt, size int64) (*GGUF, error) {
	r := &ggufReader{br: bufio.NewReaderSize(io.NewSectionReader(ra, 0, size), 1<<16), size: size}
	magic, err := r.read(4)
	if err != nil {
		return nil, fmt.Errorf("not a GGUF file: too short (%d bytes)", size)
	}
	if string(magic) != ggufMagic {
		return nil, fmt.Errorf("not a GGUF file: magic %q, want %q", magic, ggufMagic)
	}
	g := &GGUF{r: ra, kvIndex: map[string]int{}, tIndex: map[string]int{}}
	if g.Version, err = r.u32(); err != nil {
		return nil, fmt.Errorf("version: %w", err)
	}
	if g.Version != 2 && g.Version != 3 {
		return nil, fmt.Errorf("unsupported GGUF version %d (want 2 or 3)", g.Version)
	}
	// Minimum encoded sizes: a tensor info is name length + n_dims + type + offset; a KV is
	// key length + type + a one-byte value.
	nTensors, err := r.count(8 + 4 + 4 + 8)
	if err != nil {
		return nil, fmt.Errorf("tensor count: %w", err)
	}
	nKV, err := r.count(8 + 4 + 1)
	if err != nil {
		return nil, fmt.Errorf("metadata count: %w", err)
	}
	if err := g.readKVs(r, nKV); err != nil {
		return nil, err
	}
	if g.Alignment, err = g.alignment(); err != nil {
		return nil, err
	}
	if err := g.readTensorInfos(r, nTensors); err != nil {
		return nil, err
	}
	g.DataOffset = alignUp(r.pos, g.Alignment)
	return g, g.checkTensorLayout(size)
}

func (g *GGUF) readKVs(r *ggufReader, n int64) error {
	g.KV = make([]KV, 0, n)
	for i := range n {
		key, err := r.str(ggufMaxKeyLen)
		if err != nil {
			return fmt.Errorf("metadata %d: key: %w", i, err)
		}
		if key == "" {
			return fmt.Errorf("metadata %d: empty key", i)
		}
		if _, dup := g.kvIndex[key]; dup {
			return fmt.Errorf("metadata %d: duplicate key %q", i, key)
		}
		t, err := r.u32()
		if err != nil {
			return fmt.Errorf("metadata %q: type: %w", key, err)
		}
		v, err := r.value(GGUFValueType(t))
		if err != nil {
			return fmt.Errorf("metadata %q: %w", key, err)
		}
		g.kvIndex[key] = len(g.KV)
		g.KV = append(g.KV, KV{Key: key, Value: v})
	}
	return nil
}

func (g *GGUF) alignment() (int64, error) {
	kv, ok := g.Lookup(ggufAlignmentKey)
	if !ok {
		return ggufDefaultAlignment, nil
	}
	a, ok := kv.Value.(uint32)
	if !ok {
		return 0, fmt.Errorf("metadata %q: type %T, want uint32", ggufAlignmentKey, kv.Value)
	}
	if a == 0 || a&(a-1) != 0 {
		return 0, fmt.Errorf("metadata %q: %d is not a power of two", ggufAlignmentKey, a)
	}
	return int64(a), nil
}

func (g *GGUF) readTensorInfos(r *ggufReader, n int64) error {
	g.Tensors = make([]TensorInfo, 0, n)
	for i := range n {
		name, err := r.str(ggufMaxTensorName)
		if err != nil {
			return fmt.Errorf("tensor %d: name: %w", i, err)
		}
		if _, dup := g.tIndex[name]; dup {
			return fmt.Errorf("tensor %d: duplicate name %q", i, name)
		}
		nDims, err := r.u32()
		if err != nil {
			return fmt.Errorf("tensor %q: dims: %w", name, err)
		}
		if nDims > ggufMaxDims {
			return fmt.Errorf("tensor %q: %d dims, at most %d", name, nDims, ggufMaxDims)
		}
		dims := make([]int64, nDims)
		for j := range dims {
			d, err := r.u64()
			if err != nil {
				return fmt.Errorf("tensor %q: dim %d: %w", name, j, err)
			}
			if d > math.MaxInt64 {
				return fmt.Errorf("tensor %q: dim %d is negative", name, j)
			}
			dims[j] = int64(d)
		}
		t, err := r.u32()
		if err != nil {
			return fmt.Errorf("tensor %q: type: %w", name, err)
		}
		off, err := r.u64()
		if err != nil {
			return fmt.Errorf("tensor %q: offset: %w", name, err)
		}
		if off > math.MaxInt64 {
			return fmt.Errorf("tensor %q: offset %d out of range", name, off)
		}
		sz, err := TensorBytes(GGMLType(t), dims)
		if err != nil {
			return fmt.Errorf("tensor %q: %w", name, err)
		}
		g.tIndex[name] = len(g.Tensors)
		g.Tensors = append(g.Tensors, TensorInfo{Name: name, Type: GGMLType(t), Dims: dims, Offset: int64(off), Size: sz})
	}
	return nil
}

// checkTensorLayout requires what llama.cpp requires: tensors stored back to back in info
// order, each starting on an alignment boundary, and all of them inside the file.
func (g *GGUF) checkTensorLayout(fileSize int64) error {
	if g.DataOffset > fileSize && len(g.Tensors) > 0 {
		return fmt.Errorf("data section at %d starts past the end of the %d-byte file", g.DataOffset, fileSize)
	}
	var next int64
	for _, t := range g.Tensors {
		if t.Offset != next {
			return fmt.Errorf("tensor %q: offset %d, expected %d", t.Name, t.Offset, next)
		}
		if t.Size > fileSize-g.DataOffset-t.Offset {
			return fmt.Errorf("tensor %q: %d bytes at offset %d run past the end of the file (%d bytes): truncated?",
				t.Name, t.Size, g.DataOffset+t.Offset, fileSize)
		}
		next = alignUp(t.Offset+t.Size, g.Alignment)
	}
	return nil
}

func alignUp(n, align int64) int64 {
	return (n + align - 1) / align * align
}

// Lookup returns the metadata pair with the given key.
func (g *GGUF) Lookup(key string) (KV, bool) {
	i, ok := g.kvIndex[key]
	if !ok {
		return KV{}, false
	}
	return g.KV[i], true
}

func (g *GGUF) lookup(key string) (any, error) {
	kv, ok := g.Lookup(key)
	if !ok {
		return nil, fmt.Errorf("gguf: no metadata key %q", key)
	}
	return kv.Value, nil
}

// String returns a string value.
func (g *GGUF) String(key string) (string, error) {
	v, err := g.lookup(key)
	if err != nil {
		return "", err
	}
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("gguf: key %q is %T, not a string", key, v)
	}
	return s, nil
}

// Uint returns an integer value of any width and signedness that is not negative.
func (g *GGUF) Uint(key string) (uint64, error) {
	v, err := g.lookup(key)
	if err != nil {
		return 0, err
	}
	var i int64
	switch x := v.(type) {
	case uint8:
		return uint64(x), nil
	case uint16:
		return uint64(x), nil
	case uint32:
		return uint64(x), nil
	case uint64:
		return x, nil
	case int8:
		i = int64(x)
	case int16:
		i = int64(x)
	case int32:
		i = int64(x)
	case int64:
		i = x
	default:
		return 0, fmt.Errorf("gguf: key %q is %T, not an integer", key, v)
	}
	if i < 0 {
		return 0, fmt.Errorf("gguf: key %q is negative (%d)", key, i)
	}
	return uint64(i), nil
}

// Float returns a float32 or float64 value.
func (g *GGUF) Float(key string) (float64, error) {
	v, err := g.lookup(key)
	if err != nil {
		return 0, err
	}
	switch x := v.(type) {
	case float32:
		return float64(x), nil
	case float64:
		return x, nil
	}
	return 0, fmt.Errorf("gguf: key %q is %T, not a float", key, v)
}

// Bool returns a bool value.
func (g *GGUF) Bool(key string) (bool, error) {
	v, err := g.lookup(key)
	if err != nil {
		return false, err
	}
	b, ok := v.(bool)
	if !ok {
		return false, fmt.Errorf("gguf: key %q is %T, not a bool", key, v)
	}
	return b, nil
}

// Strings returns an array of strings.
func (g *GGUF) Strings(key string) ([]string, error) {
	v, err := g.lookup(key)
	if err != nil {
		return nil, err
	}
	s, ok := v.([]string)
	if !ok {
		return nil, fmt.Errorf("gguf: key %q is %T, not an array of strings", key, v)
	}
	return s, nil
}

// Tensor returns the info of the named tensor.
func (g *GGUF) Tensor(name string) (TensorInfo, bool) {
	i, ok := g.tIndex[name]
	if !ok {
		return TensorInfo{}, false
	}
	return g.Tensors[i], true
}

// TensorData streams a tensor's raw bytes, a part of the file at a time.
func (g *GGUF) TensorData(info TensorInfo) *io.SectionReader {
	return io.NewSectionReader(g.r, g.DataOffset+info.Offset, info.Size)
}

// ReadTensor returns the raw bytes of the named tensor.
func (g *GGUF) ReadTensor(name string) (TensorInfo, []byte, error) {
	t, ok := g.Tensor(name)
	if !ok {
		return TensorInfo{}, nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	buf := make([]byte, t.Size)
	if len(buf) == 0 { // an empty tensor may sit at the very end, where ReadAt reports EOF
		return t, buf, nil
	}
	if _, err := g.r.ReadAt(buf, g.DataOffset+t.Offset); err != nil {
		return TensorInfo{}, nil, fmt.Errorf("gguf: read tensor %q: %w", name, err)
	}
	return t, buf, nil
}

// ReadTensorF32 returns the named tensor as float32, converting F16 and BF16 and
// dequantising Q8_0.
func (g *GGUF) ReadTensorF32(name string) ([]float32, error) {
	t, raw, err := g.ReadTensor(name)
	if err != nil {
		return nil, err
	}
	v, err := Dequantize(t.Type, raw)
	if err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	return v, nil
}
