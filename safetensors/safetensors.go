// Package safetensors reads and writes Hugging Face's safetensors weights: one file, or the
// shards of an index. Readers treat every file as untrusted: each length and offset of a
// header is checked against the file size before anything is allocated, so a lying header
// yields an error, not a huge allocation or a panic.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/atomicfile"
	"github.com/umad-dev/umad/internal/jsonfile"
)

// DType is a safetensors element type.
type DType string

// Element types. F32, F16 and BF16 convert to float32; the others can be read as raw bytes.
const (
	F32  DType = "F32"
	F16  DType = "F16"
	BF16 DType = "BF16"
	F64  DType = "F64"
	I64  DType = "I64"
	I32  DType = "I32"
	I16  DType = "I16"
	I8   DType = "I8"
	U8   DType = "U8"
	Bool DType = "BOOL"
)

var dtypeBytes = map[DType]int64{F32: 4, F16: 2, BF16: 2, F64: 8, I64: 8, I32: 4, I16: 2, I8: 1, U8: 1, Bool: 1}

// Size is the bytes of one element; 0 for an unknown type.
func (d DType) Size() int64 { return dtypeBytes[d] }

// FloatDType is the float dtype that name names, in any case: f32, f16 or bf16.
func FloatDType(name string) (DType, bool) {
	for _, d := range []DType{F32, F16, BF16} {
		if strings.EqualFold(name, string(d)) {
			return d, true
		}
	}
	return "", false
}

// GGMLType is the ggml type of a float dtype, the ones that convert: F32, F16 and BF16.
func (d DType) GGMLType() (gguf.GGMLType, error) {
	switch d {
	case F32:
		return gguf.TypeF32, nil
	case F16:
		return gguf.TypeF16, nil
	case BF16:
		return gguf.TypeBF16, nil
	}
	return 0, fmt.Errorf("dtype %s is not a float type that converts (want F32, F16 or BF16)", d)
}

// The names of a model directory's weights: one file, or an index of shards.
const (
	FileName  = "model.safetensors"
	IndexName = "model.safetensors.index.json"
)

const (
	// stMaxHeader is the header size limit the reference implementation also enforces.
	stMaxHeader       = 100 << 20
	stMetadataKey     = "__metadata__"
	stMaxIndexBytes   = 100 << 20
	stHeaderAlignment = 8
)

// NamedTensor is a tensor to write: PyTorch shape (outermost first) and its bytes.
type NamedTensor struct {
	Name  string
	DType DType
	Shape []int64
	Write gguf.WriteFunc
}

// TensorView is a tensor read from a safetensors file.
type TensorView struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// F32 converts F32, F16 or BF16 data to float32.
func (t TensorView) F32() ([]float32, error) {
	gt, err := t.DType.GGMLType()
	if err != nil {
		return nil, fmt.Errorf("tensor %q: cannot convert %s to F32", t.Name, t.DType)
	}
	return gguf.Dequantize(gt, t.Data)
}

// stEntry locates one tensor inside one file.
type stEntry struct {
	file       *stFile
	dtype      DType
	shape      []int64
	begin, end int64 // relative to the file's data section
}

type stFile struct {
	name      string
	r         io.ReaderAt
	closer    io.Closer
	dataStart int64
	metadata  map[string]string
	entries   map[string]stEntry
}

// File is an open safetensors model: one file, or the shards of an index.
type File struct {
	// Metadata is the __metadata__ of the single file or of the first shard.
	Metadata map[string]string
	files    []*stFile
	entries  map[string]stEntry
}

// Open opens a .safetensors file, a model.safetensors.index.json, or a directory
// holding either (the index wins).
func Open(path string) (*File, error) {
	s, err := openSafetensors(path)
	if err != nil {
		return nil, fmt.Errorf("open safetensors %s: %w", path, err)
	}
	return s, nil
}

func openSafetensors(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if st.IsDir() {
		if _, err := os.Stat(filepath.Join(path, IndexName)); err == nil {
			return openIndex(filepath.Join(path, IndexName))
		}
		path = filepath.Join(path, FileName)
	} else if strings.HasSuffix(path, ".json") {
		return openIndex(path)
	}
	f, err := openSTFile(path)
	if err != nil {
		return nil, err
	}
	return singleFile(f), nil
}

func singleFile(f *stFile) *File {
	return &File{Metadata: f.metadata, files: []*stFile{f}, entries: f.entries}
}

func openSTFile(path string) (*stFile, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := fh.Stat()
	if err != nil {
		fh.Close()
		return nil, err
	}
	f, err := parseSafetensors(fh, st.Size())
	if err != nil {
		fh.Close()
		return nil, fmt.Errorf("%s: %w", filepath.Base(path), err)
	}
	f.name = filepath.Base(path)
	f.closer = fh
	return f, nil
}

type stIndex struct {
	WeightMap map[string]string `json:"weight_map"`
}

func openIndex(path string) (_ *File, err error) {
	raw, err := jsonfile.Read(path, stMaxIndexBytes)
	if err != nil {
		return nil, err
	}
	var idx stIndex
	if err := json.Unmarshal(raw, &idx); err != nil {
		return nil, fmt.Errorf("parse index: %w", err)
	}
	if len(idx.WeightMap) == 0 {
		return nil, errors.New("index has no weight_map entries")
	}
	s := &File{entries: map[string]stEntry{}}
	defer func() { // close the shards opened before the error
		if err != nil {
			s.Close()
		}
	}()
	byName := map[string]*stFile{}
	dir := filepath.Dir(path)
	// Sorted so that errors and the first shard's metadata do not depend on map order.
	for _, shard := range slices.Sorted(maps.Values(idx.WeightMap)) {
		if byName[shard] != nil {
			continue
		}
		if !filepath.IsLocal(shard) || filepath.Base(shard) != shard {
			return nil, fmt.Errorf("index names shard %q outside its directory", shard)
		}
		f, err := openSTFile(filepath.Join(dir, shard))
		if err != nil {
			return nil, err
		}
		byName[shard] = f
		s.files = append(s.files, f)
	}
	s.Metadata = s.files[0].metadata
	for name, shard := range idx.WeightMap {
		e, ok := byName[shard].entries[name]
		if !ok {
			return nil, fmt.Errorf("index puts tensor %q in %s, which does not hold it", name, shard)
		}
		s.entries[name] = e
	}
	return s, nil
}

type stHeaderEntry struct {
	DType       DType   `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// parseSafetensors reads and validates the header of a safetensors image of the given size.
func parseSafetensors(r io.ReaderAt, size int64) (*stFile, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, fmt.Errorf("not a safetensors file: %d bytes is too short", size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > uint64(size-8) || n > stMaxHeader {
		return nil, fmt.Errorf("header length %d does not fit a %d-byte file (limit %d): not safetensors, or truncated", n, size, stMaxHeader)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("read header: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &fields); err != nil {
		return nil, fmt.Errorf("parse header: %w", err)
	}
	f := &stFile{r: r, dataStart: 8 + int64(n), entries: make(map[string]stEntry, len(fields))}
	dataLen := size - f.dataStart
	for name, raw := range fields {
		if name == stMetadataKey {
			if err := json.Unmarshal(raw, &f.metadata); err != nil {
				return nil, fmt.Errorf("parse %s: %w", stMetadataKey, err)
			}
			continue
		}
		var h stHeaderEntry
		if err := json.Unmarshal(raw, &h); err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		e, err := checkEntry(h, dataLen)
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", name, err)
		}
		e.file = f
		f.entries[name] = e
	}
	return f, checkNoOverlap(f.entries)
}

func checkEntry(h stHeaderEntry, dataLen int64) (stEntry, error) {
	elem, ok := dtypeBytes[h.DType]
	if !ok {
		return stEntry{}, fmt.Errorf("unknown dtype %q", h.DType)
	}
	if len(h.DataOffsets) != 2 {
		return stEntry{}, fmt.Errorf("data_offsets has %d values, want 2", len(h.DataOffsets))
	}
	begin, end := h.DataOffsets[0], h.DataOffsets[1]
	if begin < 0 || end < begin || end > dataLen {
		return stEntry{}, fmt.Errorf("data_offsets [%d, %d] outside the %d-byte data section: truncated?", begin, end, dataLen)
	}
	want, err := TensorBytes(h.Shape, elem)
	if err != nil {
		return stEntry{}, err
	}
	if want != end-begin {
		return stEntry{}, fmt.Errorf("shape %v of %s needs %d bytes, data_offsets give %d", h.Shape, h.DType, want, end-begin)
	}
	return stEntry{dtype: h.DType, shape: h.Shape, begin: begin, end: end}, nil
}

// TensorBytes is the data size of a tensor of the shape with elements of elem bytes, or an
// error for a negative dimension or an overflowing size.
func TensorBytes(shape []int64, elem int64) (int64, error) {
	size := elem
	for _, d := range shape {
		if d < 0 {
			return 0, fmt.Errorf("negative dimension in shape %v", shape)
		}
		if d != 0 && size > math.MaxInt64/d {
			return 0, fmt.Errorf("shape %v overflows", shape)
		}
		size *= d
	}
	return size, nil
}

func checkNoOverlap(entries map[string]stEntry) error {
	names := slices.Collect(maps.Keys(entries))
	sort.Slice(names, func(i, j int) bool {
		a, b := entries[names[i]], entries[names[j]]
		if a.begin != b.begin {
			return a.begin < b.begin
		}
		return names[i] < names[j]
	})
	for i := 1; i < len(names); i++ {
		prev, cur := entries[names[i-1]], entries[names[i]]
		if cur.begin < prev.end {
			return fmt.Errorf("tensors %q and %q overlap", names[i-1], names[i])
		}
	}
	return nil
}

// Names returns the tensor names, sorted.
func (s *File) Names() []string {
	return slices.Sorted(maps.Keys(s.entries))
}

// DType is the named tensor's dtype, read from the header (no data is read).
func (s *File) DType(name string) (DType, bool) {
	e, ok := s.entries[name]
	return e.dtype, ok
}

// Shape is a tensor's shape (PyTorch order), from the header: no data is read.
func (s *File) Shape(name string) ([]int64, bool) {
	e, ok := s.entries[name]
	return slices.Clone(e.shape), ok
}

// Reader streams a tensor's bytes from its file, for a tensor that need not be held whole.
func (s *File) Reader(name string) (*io.SectionReader, error) {
	e, ok := s.entries[name]
	if !ok {
		return nil, fmt.Errorf("safetensors: no tensor %q", name)
	}
	return io.NewSectionReader(e.file.r, e.file.dataStart+e.begin, e.end-e.begin), nil
}

// Tensor reads the named tensor.
func (s *File) Tensor(name string) (TensorView, error) {
	e, ok := s.entries[name]
	if !ok {
		return TensorView{}, fmt.Errorf("safetensors: no tensor %q", name)
	}
	data := make([]byte, e.end-e.begin)
	if len(data) == 0 { // an empty tensor may sit at the very end, where ReadAt reports EOF
		return TensorView{Name: name, DType: e.dtype, Shape: slices.Clone(e.shape), Data: data}, nil
	}
	if _, err := e.file.r.ReadAt(data, e.file.dataStart+e.begin); err != nil {
		return TensorView{}, fmt.Errorf("safetensors: read %q from %s: %w", name, e.file.name, err)
	}
	return TensorView{Name: name, DType: e.dtype, Shape: slices.Clone(e.shape), Data: data}, nil
}

// Close closes every file.
func (s *File) Close() error {
	var errs []error
	for _, f := range s.files {
		if f.closer != nil {
			errs = append(errs, f.closer.Close())
		}
	}
	return errors.Join(errs...)
}

// Write writes tensors, in the given order, to one safetensors file atomically.
func Write(path string, tensors []NamedTensor, metadata map[string]string) error {
	hdr, sizes, err := safetensorsHeader(tensors, metadata)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return atomicfile.Write(path, func(bw io.Writer) error {
		if err := binary.Write(bw, binary.LittleEndian, uint64(len(hdr))); err != nil {
			return err
		}
		if _, err := bw.Write(hdr); err != nil {
			return err
		}
		cw := &gguf.CountingWriter{W: bw}
		for i, t := range tensors {
			before := cw.N
			if err := t.Write(cw); err != nil {
				return fmt.Errorf("tensor %q: %w", t.Name, err)
			}
			if got := cw.N - before; got != sizes[i] {
				return fmt.Errorf("tensor %q: wrote %d bytes, its dtype and shape need %d", t.Name, got, sizes[i])
			}
		}
		return nil
	})
}

// safetensorsHeader returns the JSON header padded with spaces to 8 bytes, and each tensor's
// byte size.
func safetensorsHeader(tensors []NamedTensor, metadata map[string]string) ([]byte, []int64, error) {
	fields := make(map[string]any, len(tensors)+1)
	if len(metadata) > 0 {
		fields[stMetadataKey] = metadata
	}
	sizes := make([]int64, len(tensors))
	var off int64
	for i, t := range tensors {
		if t.Name == "" || t.Name == stMetadataKey {
			return nil, nil, fmt.Errorf("invalid tensor name %q", t.Name)
		}
		if _, dup := fields[t.Name]; dup {
			return nil, nil, fmt.Errorf("tensor %q given twice", t.Name)
		}
		elem, ok := dtypeBytes[t.DType]
		if !ok {
			return nil, nil, fmt.Errorf("tensor %q: unknown dtype %q", t.Name, t.DType)
		}
		size, err := TensorBytes(t.Shape, elem)
		if err != nil {
			return nil, nil, fmt.Errorf("tensor %q: %w", t.Name, err)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{} // a scalar's shape is [], not null
		}
		fields[t.Name] = stHeaderEntry{DType: t.DType, Shape: shape, DataOffsets: []int64{off, off + size}}
		sizes[i] = size
		off += size
	}
	hdr, err := json.Marshal(fields)
	if err != nil {
		return nil, nil, err
	}
	if rem := len(hdr) % stHeaderAlignment; rem != 0 {
		hdr = append(hdr, bytes.Repeat([]byte{' '}, stHeaderAlignment-rem)...)
	}
	return hdr, sizes, nil
}

// WriteSharded writes tensors into dir as model-0000i-of-0000n.safetensors shards of
// at most maxShardBytes of data each (a larger tensor gets a shard of its own), plus
// model.safetensors.index.json. Every file is written atomically, the index last.
func WriteSharded(dir string, tensors []NamedTensor, metadata map[string]string, maxShardBytes int64) error {
	if maxShardBytes <= 0 {
		return fmt.Errorf("write shards in %s: shard size must be positive, got %d", dir, maxShardBytes)
	}
	if len(tensors) == 0 {
		return fmt.Errorf("write shards in %s: no tensors", dir)
	}
	var shards [][]NamedTensor
	var shardBytes, total int64
	for _, t := range tensors {
		elem, ok := dtypeBytes[t.DType]
		if !ok {
			return fmt.Errorf("write shards in %s: tensor %q: unknown dtype %q", dir, t.Name, t.DType)
		}
		size, err := TensorBytes(t.Shape, elem)
		if err != nil {
			return fmt.Errorf("write shards in %s: tensor %q: %w", dir, t.Name, err)
		}
		if len(shards) == 0 || (shardBytes+size > maxShardBytes && shardBytes > 0) {
			shards = append(shards, nil)
			shardBytes = 0
		}
		shards[len(shards)-1] = append(shards[len(shards)-1], t)
		shardBytes += size
		total += size
	}
	weightMap := map[string]string{}
	for i, shard := range shards {
		name := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		if err := Write(filepath.Join(dir, name), shard, metadata); err != nil {
			return err
		}
		for _, t := range shard {
			weightMap[t.Name] = name
		}
	}
	index := map[string]any{
		"metadata":   map[string]any{"total_size": total},
		"weight_map": weightMap,
	}
	return jsonfile.Write(filepath.Join(dir, IndexName), index)
}
