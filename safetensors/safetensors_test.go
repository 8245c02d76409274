package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/umad-dev/umad/gguf"
)

// stTestTensors has one tensor per writable dtype, with values exact in every format.
func stTestTensors(t testing.TB) ([]NamedTensor, map[string][]float32) {
	vals := map[string][]float32{
		"a.f32":  {1.5, -2, 0.1, 1e-30, 3e38, 0},
		"b.f16":  {1, -0.5, 65504, 0.25},
		"c.bf16": {1, -2, 0.015625, 256, 3, -0.75, 1024, 2},
	}
	types := map[string]struct {
		st DType
		gg gguf.GGMLType
	}{"a.f32": {F32, gguf.TypeF32}, "b.f16": {F16, gguf.TypeF16}, "c.bf16": {BF16, gguf.TypeBF16}}
	shapes := map[string][]int64{"a.f32": {2, 3}, "b.f16": {4}, "c.bf16": {2, 2, 2}}
	var out []NamedTensor
	for _, name := range []string{"a.f32", "b.f16", "c.bf16"} {
		raw, err := gguf.EncodeTensor(types[name].gg, vals[name])
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, NamedTensor{Name: name, DType: types[name].st, Shape: shapes[name], Write: gguf.Bytes(raw)})
	}
	return out, vals
}

func checkSTContents(t *testing.T, s *File, tensors []NamedTensor, vals map[string][]float32) {
	t.Helper()
	if got := s.Names(); !reflect.DeepEqual(got, []string{"a.f32", "b.f16", "c.bf16"}) {
		t.Errorf("names %v", got)
	}
	for _, want := range tensors {
		tv, err := s.Tensor(want.Name)
		if err != nil {
			t.Fatal(err)
		}
		if tv.DType != want.DType || !reflect.DeepEqual(tv.Shape, want.Shape) {
			t.Errorf("%s: %s %v, want %s %v", want.Name, tv.DType, tv.Shape, want.DType, want.Shape)
		}
		if dt, ok := s.DType(want.Name); !ok || dt != want.DType {
			t.Errorf("DType(%s) = %s %v, want %s", want.Name, dt, ok, want.DType)
		}
		got, err := tv.F32()
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, vals[want.Name]) {
			t.Errorf("%s = %v, want %v", want.Name, got, vals[want.Name])
		}
	}
}

func TestSafetensorsRoundTrip(t *testing.T) {
	dir := t.TempDir()
	tensors, vals := stTestTensors(t)
	path := filepath.Join(dir, "model.safetensors")
	meta := map[string]string{"format": "pt", "note": "<tiny>"}
	if err := Write(path, tensors, meta); err != nil {
		t.Fatal(err)
	}
	// The header is 8-byte aligned so that readers can map the data in place.
	raw, _ := os.ReadFile(path)
	if n := binary.LittleEndian.Uint64(raw); n%8 != 0 {
		t.Errorf("header length %d is not a multiple of 8", n)
	}
	for _, open := range []string{path, dir} { // a file, or the directory holding it
		s, err := Open(open)
		if err != nil {
			t.Fatal(err)
		}
		checkSTContents(t, s, tensors, vals)
		if !reflect.DeepEqual(s.Metadata, meta) {
			t.Errorf("metadata %v, want %v", s.Metadata, meta)
		}
		if _, err := s.Tensor("absent"); err == nil {
			t.Error("reading an absent tensor succeeded")
		}
		s.Close()
	}
}

func TestSafetensorsSharded(t *testing.T) {
	dir := t.TempDir()
	tensors, vals := stTestTensors(t)
	// 24 bytes per shard: a.f32 (24) alone, then b.f16 (8) and c.bf16 (16) together.
	if err := WriteSharded(dir, tensors, map[string]string{"format": "pt"}, 24); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, IndexName))
	if err != nil {
		t.Fatal(err)
	}
	var idx struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	wantMap := map[string]string{
		"a.f32":  "model-00001-of-00002.safetensors",
		"b.f16":  "model-00002-of-00002.safetensors",
		"c.bf16": "model-00002-of-00002.safetensors",
	}
	if !reflect.DeepEqual(idx.WeightMap, wantMap) || idx.Metadata["total_size"] != 48 {
		t.Errorf("index %s", raw)
	}
	for _, open := range []string{dir, filepath.Join(dir, IndexName)} {
		s, err := Open(open)
		if err != nil {
			t.Fatal(err)
		}
		checkSTContents(t, s, tensors, vals)
		s.Close()
	}
}

func TestSafetensorsIndexErrors(t *testing.T) {
	tests := []struct {
		name    string
		index   string
		wantErr string
	}{
		{"shard outside the directory", `{"weight_map": {"a": "../x.safetensors"}}`, "outside its directory"},
		{"tensor not in its shard", `{"weight_map": {"zzz": "model.safetensors"}}`, `"zzz"`},
		{"no entries", `{"weight_map": {}}`, "no weight_map"},
		{"not JSON", `{"weight_map": `, "parse index"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tensors, _ := stTestTensors(t)
			if err := Write(filepath.Join(dir, "model.safetensors"), tensors, nil); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(dir, IndexName)
			if err := os.WriteFile(p, []byte(tc.index), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// stFileBytes builds a safetensors image from a raw header and data.
func stFileBytes(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	return append(append(b, header...), data...)
}

func TestSafetensorsCorruptInputs(t *testing.T) {
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"empty", nil, "too short"},
		{"lying header length", binary.LittleEndian.AppendUint64(nil, 1<<50), "does not fit"},
		{"header not JSON", stFileBytes(`{"a": `, nil), "parse header"},
		{"unknown dtype", stFileBytes(`{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}`, []byte{0}), `unknown dtype "F7"`},
		{"data past the end", stFileBytes(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, make([]byte, 8)), "truncated"},
		{"shape disagrees with offsets", stFileBytes(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, make([]byte, 8)), "needs 12 bytes"},
		{"negative dimension", stFileBytes(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, make([]byte, 8)), "negative"},
		{"overflowing shape", stFileBytes(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, make([]byte, 8)), "overflows"},
		{"one offset", stFileBytes(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4]}}`, make([]byte, 8)), "want 2"},
		{"overlapping tensors", stFileBytes(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)), "overlap"},
		{"bad metadata", stFileBytes(`{"__metadata__":{"k":1}}`, nil), "__metadata__"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := parseSafetensors(bytes.NewReader(tc.data), int64(len(tc.data)))
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
				t.Errorf("allocated %d bytes for a %d-byte input", grown, len(tc.data))
			}
		})
	}
}

func TestWriteSafetensorsRejects(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		tensors []NamedTensor
		wantErr string
	}{
		{"duplicate name", []NamedTensor{{Name: "a", DType: F32, Shape: []int64{1}, Write: gguf.Bytes(make([]byte, 4))}, {Name: "a", DType: F32, Shape: []int64{1}, Write: gguf.Bytes(make([]byte, 4))}}, "twice"},
		{"reserved name", []NamedTensor{{Name: "__metadata__", DType: F32, Write: gguf.Bytes(make([]byte, 4))}}, "invalid tensor name"},
		{"unknown dtype", []NamedTensor{{Name: "a", DType: "Q4", Shape: []int64{1}, Write: gguf.Bytes(nil)}}, "unknown dtype"},
		{"short data", []NamedTensor{{Name: "a", DType: F32, Shape: []int64{2}, Write: gguf.Bytes(make([]byte, 4))}}, "wrote 4 bytes"},
	}
	for _, tc := range tests {
		path := filepath.Join(dir, "x.safetensors")
		if err := Write(path, tc.tensors, nil); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.wantErr)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s: a failed write left %s", tc.name, path)
		}
	}
}

// Hugging Face writes a scalar's shape as [], and readers must accept it.
func TestSafetensorsScalar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.safetensors")
	raw, _ := gguf.EncodeTensor(gguf.TypeF32, []float32{7})
	if err := Write(path, []NamedTensor{{Name: "step", DType: F32, Write: gguf.Bytes(raw)}}, nil); err != nil {
		t.Fatal(err)
	}
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tv, err := s.Tensor("step")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := tv.F32(); len(tv.Shape) != 0 || !reflect.DeepEqual(v, []float32{7}) {
		t.Errorf("scalar read as shape %v values %v", tv.Shape, v)
	}
}

// The float dtypes' names parse in any case; others do not.
func TestFloatDType(t *testing.T) {
	for name, want := range map[string]DType{"f32": F32, "F16": F16, "bf16": BF16} {
		if got, ok := FloatDType(name); !ok || got != want {
			t.Errorf("FloatDType(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "f64", "i8", "q8_0"} {
		if got, ok := FloatDType(name); ok {
			t.Errorf("FloatDType(%q) = %q, want none", name, got)
		}
	}
}
