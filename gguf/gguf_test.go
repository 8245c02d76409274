package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/sharedtest"
)

func sharedFile(t *testing.T, rel string) string { return sharedtest.Path(t, rel) }

// allKVs has one value of every GGUF type and an array of every element type.
var allKVs = []KV{
	{"t.u8", uint8(200)},
	{"t.i8", int8(-100)},
	{"t.u16", uint16(60000)},
	{"t.i16", int16(-30000)},
	{"t.u32", uint32(4000000000)},
	{"t.i32", int32(-2000000000)},
	{"t.f32", float32(3.25)},
	{"t.bool", true},
	{"t.str", "héllo\x00world"},
	{"t.u64", uint64(1) << 63},
	{"t.i64", int64(-1) << 62},
	{"t.f64", math.Pi},
	{"t.empty", ""},
	{"a.u8", []uint8{0, 1, 255}},
	{"a.i8", []int8{-128, 0, 127}},
	{"a.u16", []uint16{1, 65535}},
	{"a.i16", []int16{-32768, 5}},
	{"a.u32", []uint32{7}},
	{"a.i32", []int32{-1, 2, -3}},
	{"a.f32", []float32{0.5, -1e-20}},
	{"a.bool", []bool{true, false, true}},
	{"a.str", []string{"", "a b", "<|im_end|>"}},
	{"a.u64", []uint64{math.MaxUint64}},
	{"a.i64", []int64{math.MinInt64}},
	{"a.f64", []float64{math.Inf(-1), 1e300}},
	{"a.empty", []int32{}},
}

// testValues returns n values with a wide dynamic range.
func testValues(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)*0.7) * math.Pow(10, float64(i%5-2)))
	}
	return v
}

func writeTestGGUF(t *testing.T, path string, kvs []KV, tensors map[string][]float32, types map[string]GGMLType) {
	t.Helper()
	w, err := CreateGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if err := w.AddKV(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"f32", "f16", "bf16", "q8"} {
		vals, ok := tensors[name]
		if !ok {
			continue
		}
		raw, err := EncodeTensor(types[name], vals)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensor(name, types[name], []int64{32, int64(len(vals) / 32)}, raw); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestGGUFRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rt.gguf")
	vals := testValues(96)
	types := map[string]GGMLType{"f32": TypeF32, "f16": TypeF16, "bf16": TypeBF16, "q8": TypeQ8_0}
	tensors := map[string][]float32{"f32": vals, "f16": vals, "bf16": vals, "q8": vals}
	writeTestGGUF(t, path, allKVs, tensors, types)

	g, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Version != 3 || g.Alignment != 32 || g.DataOffset%32 != 0 {
		t.Errorf("version %d alignment %d data offset %d, want v3, 32, aligned", g.Version, g.Alignment, g.DataOffset)
	}
	for _, want := range allKVs {
		got, ok := g.Lookup(want.Key)
		if !ok || !reflect.DeepEqual(got.Value, want.Value) {
			t.Errorf("%s = %#v, want %#v", want.Key, got.Value, want.Value)
		}
	}
	// The writer adds general.alignment when the caller did not.
	if a, err := g.Uint("general.alignment"); err != nil || a != 32 {
		t.Errorf("general.alignment = %d, %v", a, err)
	}
	for i, ti := range g.Tensors {
		if ti.Offset%32 != 0 {
			t.Errorf("tensor %d %q at unaligned offset %d", i, ti.Name, ti.Offset)
		}
		if !reflect.DeepEqual(ti.Dims, []int64{32, 3}) {
			t.Errorf("tensor %q dims %v", ti.Name, ti.Dims)
		}
	}

	// Each type's own tolerance: exact for F32, half-ulp of the format for F16/BF16, and half a
	// quantisation step (plus the F16 rounding of the scale) for Q8_0.
	for name, vals := range tensors {
		got, err := g.ReadTensorF32(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(vals) {
			t.Fatalf("%s: %d values, want %d", name, len(got), len(vals))
		}
		for i, v := range vals {
			var tol float64
			switch types[name] {
			case TypeF16:
				tol = math.Max(math.Abs(float64(v))*math.Ldexp(1, -11), math.Ldexp(1, -25))
			case TypeBF16:
				tol = math.Abs(float64(v)) * math.Ldexp(1, -8)
			case TypeQ8_0:
				block := vals[i/32*32 : i/32*32+32]
				var amax float64
				for _, b := range block {
					amax = math.Max(amax, math.Abs(float64(b)))
				}
				tol = amax/127/2 + amax*math.Ldexp(1, -11)
			}
			if d := math.Abs(float64(got[i]) - float64(v)); d > tol {
				t.Errorf("%s[%d] = %g, want %g within %g", name, i, got[i], v, tol)
			}
		}
	}
}

func TestGGUFStringAccessors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "acc.gguf")
	writeTestGGUF(t, path, allKVs, nil, nil)
	g, err := OpenGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	tests := []struct {
		name    string
		get     func() (any, error)
		want    any
		wantErr string
	}{
		{"uint widens u16", func() (any, error) { return g.Uint("t.u16") }, uint64(60000), ""},
		{"uint rejects a negative int", func() (any, error) { return g.Uint("t.i8") }, nil, "negative"},
		{"uint accepts a positive int64", func() (any, error) { return g.Uint("t.u64") }, uint64(1) << 63, ""},
		{"uint rejects a string", func() (any, error) { return g.Uint("t.str") }, nil, "not an integer"},
		{"float widens f32", func() (any, error) { return g.Float("t.f32") }, 3.25, ""},
		{"string", func() (any, error) { return g.String("t.str") }, "héllo\x00world", ""},
		{"bool", func() (any, error) { return g.Bool("t.bool") }, true, ""},
		{"strings", func() (any, error) { return g.Strings("a.str") }, []string{"", "a b", "<|im_end|>"}, ""},
		{"missing key names the key", func() (any, error) { return g.String("no.such") }, nil, `"no.such"`},
	}
	for _, tc := range tests {
		got, err := tc.get()
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %#v, %v; want %#v", tc.name, got, err, tc.want)
		}
	}
}

func TestGGUFWriterRejects(t *testing.T) {
	w, err := CreateGGUF(filepath.Join(t.TempDir(), "x.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
	}{
		{"unsupported value type", w.AddKV("k.int", 5)},
		{"nested array", w.AddKV("k.nested", [][]int32{{1}})},
		{"alignment not a power of two", w.AddKV("general.alignment", uint32(24))},
		{"alignment of the wrong type", w.AddKV("general.alignment", uint64(32))},
		{"duplicate key", func() error { w.AddKV("k.dup", "a"); return w.AddKV("k.dup", "b") }()},
		{"row not a whole Q8_0 block", w.AddTensor("q", TypeQ8_0, []int64{31}, make([]byte, 34))},
		{"too many dims", w.AddTensor("d", TypeF32, []int64{1, 1, 1, 1, 1}, make([]byte, 4))},
		{"name too long for ggml", w.AddTensor(strings.Repeat("n", 64), TypeF32, []int64{1}, make([]byte, 4))},
		{"unknown type", w.AddTensor("u", GGMLType(99), []int64{1}, make([]byte, 4))},
	}
	for _, tc := range tests {
		if tc.err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	if _, err := CreateGGUF(filepath.Join(t.TempDir(), "missing", "x.gguf")); err == nil {
		t.Error("CreateGGUF in a missing directory succeeded")
	}
}

// A tensor whose bytes do not match its type and dims fails Close and leaves no file behind.
func TestGGUFWriterShortTensorLeavesNoFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "short.gguf")
	w, err := CreateGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("t", TypeF32, []int64{4}, make([]byte, 12)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err == nil || !strings.Contains(err.Error(), "wrote 12 bytes") {
		t.Fatalf("Close = %v, want a byte-count error", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("directory holds %v after a failed write", entries)
	}
}

// smallGGUF returns the bytes of a valid file with metadata and two tensors.
func smallGGUF(t testing.TB) []byte {
	path := filepath.Join(t.TempDir(), "small.gguf")
	w, err := CreateGGUF(path)
	if err != nil {
		t.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.AddKV("general.architecture", "llama"))
	must(w.AddKV("tokenizer.ggml.tokens", []string{"a", "b"}))
	raw, _ := EncodeTensor(TypeF16, testValues(8))
	must(w.AddTensor("x", TypeF16, []int64{4, 2}, raw))
	raw, _ = EncodeTensor(TypeQ8_0, testValues(32))
	must(w.AddTensor("y", TypeQ8_0, []int64{32}, raw))
	must(w.Close())
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ggufHeader builds a file by hand, for headers the writer refuses to produce.
func ggufHeader(version uint32, nTensors, nKV uint64, rest ...[]byte) []byte {
	b := []byte("GGUF")
	b = binary.LittleEndian.AppendUint32(b, version)
	b = binary.LittleEndian.AppendUint64(b, nTensors)
	b = binary.LittleEndian.AppendUint64(b, nKV)
	for _, r := range rest {
		b = append(b, r...)
	}
	return b
}

func u32le(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
func u64le(v uint64) []byte { return binary.LittleEndian.AppendUint64(nil, v) }
func gstr(s string) []byte  { return append(u64le(uint64(len(s))), s...) }

func TestGGUFCorruptInputs(t *testing.T) {
	valid := smallGGUF(t)
	tests := []struct {
		name    string
		data    []byte
		wantErr string
	}{
		{"empty file", nil, "too short"},
		{"not GGUF", []byte("PK\x03\x04 this is a zip"), "not a GGUF file"},
		{"version 1 is unsupported", ggufHeader(1, 0, 0), "version 1"},
		{"big-endian version", ggufHeader(3<<24, 0, 0), "version"},
		{"lying tensor count", ggufHeader(3, 1<<40, 0), "tensor count"},
		{"lying kv count", ggufHeader(3, 0, math.MaxUint64), "metadata count"},
		{"lying key length", ggufHeader(3, 0, 1, u64le(1<<50), make([]byte, 16)), "key: string length"},
		{"unknown value type names the key", ggufHeader(3, 0, 1, gstr("my.key"), u32le(77), u32le(0)), `"my.key": unknown value type 77`},
		{"lying string length", ggufHeader(3, 0, 1, gstr("k"), u32le(uint32(GGUFString)), u64le(1<<40)), `"k"`},
		{"lying array count", ggufHeader(3, 0, 1, gstr("k"), u32le(uint32(GGUFArray)), u32le(uint32(GGUFUint64)), u64le(1<<60)), "cannot fit"},
		{"lying string array count", ggufHeader(3, 0, 1, gstr("k"), u32le(uint32(GGUFArray)), u32le(uint32(GGUFString)), u64le(1<<40)), "cannot fit"},
		{"nested array", ggufHeader(3, 0, 1, gstr("k"), u32le(uint32(GGUFArray)), u32le(uint32(GGUFArray)), u64le(0)), "nested"},
		{"duplicate key", ggufHeader(3, 0, 2, gstr("k"), u32le(0), []byte{1}, gstr("k"), u32le(0), []byte{1}), "duplicate key"},
		{"alignment of the wrong type", ggufHeader(3, 0, 1, gstr("general.alignment"), u32le(uint32(GGUFUint64)), u64le(32)), "want uint32"},
		{"alignment not a power of two", ggufHeader(3, 0, 1, gstr("general.alignment"), u32le(uint32(GGUFUint32)), u32le(48)), "power of two"},
		{"too many dims", ggufHeader(3, 1, 0, gstr("t"), u32le(5), make([]byte, 40)), "dims"},
		{"tensor data past the end", ggufHeader(3, 1, 0, gstr("t"), u32le(1), u64le(1000), u32le(0), u64le(0)), "past the end"},
		{"tensor offset not where llama.cpp expects it", ggufHeader(3, 1, 0, gstr("t"), u32le(1), u64le(1), u32le(0), u64le(32), make([]byte, 100)), "expected 0"},
		{"unknown tensor type", ggufHeader(3, 1, 0, gstr("t"), u32le(1), u64le(1), u32le(99), u64le(0)), "unsupported tensor type"},
		{"row not a whole block", ggufHeader(3, 1, 0, gstr("t"), u32le(1), u64le(31), u32le(uint32(TypeQ8_0)), u64le(0)), "block size"},
		{"row byte size overflows", ggufHeader(3, 1, 0, gstr("t"), u32le(1), u64le(1<<62), u32le(0), u64le(0)), "overflows"},
		{"element count overflows", ggufHeader(3, 1, 0, gstr("t"), u32le(2), u64le(1<<40), u64le(1<<40), u32le(0), u64le(0)), "overflows"},
		{"truncated in the tensor data", valid[:len(valid)-40], "truncated"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := parseGGUF(bytes.NewReader(tc.data), int64(len(tc.data)))
			runtime.ReadMemStats(&after)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
			}
			// A lying header must not make the reader allocate what it claims.
			if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
				t.Errorf("allocated %d bytes for a %d-byte input", grown, len(tc.data))
			}
		})
	}
}

// Every prefix of a valid file is an error, never a panic or a success.
func TestGGUFEveryTruncationFails(t *testing.T) {
	valid := smallGGUF(t)
	if _, err := parseGGUF(bytes.NewReader(valid), int64(len(valid))); err != nil {
		t.Fatalf("the full file does not parse: %v", err)
	}
	// The last tensor's trailing padding is not data, so dropping it is fine.
	g, _ := parseGGUF(bytes.NewReader(valid), int64(len(valid)))
	last := g.Tensors[len(g.Tensors)-1]
	end := g.DataOffset + last.Offset + last.Size
	for n := range int(end) {
		if _, err := parseGGUF(bytes.NewReader(valid[:n]), int64(n)); err == nil {
			t.Fatalf("a %d-byte prefix of a %d-byte file parsed", n, len(valid))
		}
	}
}

func TestOpenGGUFErrorsNameThePath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.gguf")
	if err := os.WriteFile(path, []byte("not a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenGGUF(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want it to name %s", err, path)
	}
	if _, err := OpenGGUF(filepath.Join(t.TempDir(), "absent.gguf")); err == nil {
		t.Error("opening a missing file succeeded")
	}
}

// A GGUF written by llama.cpp's own tooling reads with the values its provenance notes give.
func TestOpenRealVocabGGUF(t *testing.T) {
	g, err := OpenGGUF(sharedFile(t, "tokenizers/llama.cpp/ggml-vocab-deepseek-llm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Version != 3 || len(g.KV) != 23 || len(g.Tensors) != 0 {
		t.Errorf("version %d, %d kv, %d tensors; want 3, 23, 0", g.Version, len(g.KV), len(g.Tensors))
	}
	if pre, _ := g.String("tokenizer.ggml.pre"); pre != "deepseek-llm" {
		t.Errorf("pre = %q", pre)
	}
	if toks, err := g.Strings("tokenizer.ggml.tokens"); err != nil || len(toks) != 102400 {
		t.Errorf("%d tokens, %v; want 102400", len(toks), err)
	}
	if merges, err := g.Strings("tokenizer.ggml.merges"); err != nil || len(merges) != 99757 {
		t.Errorf("%d merges, %v; want 99757", len(merges), err)
	}
	if addBOS, err := g.Bool("tokenizer.ggml.add_bos_token"); err != nil || !addBOS {
		t.Errorf("add_bos = %v, %v", addBOS, err)
	}
}

// The names of the types EncodeTensor writes parse in any case; others do not.
func TestEncodableType(t *testing.T) {
	for name, want := range map[string]GGMLType{"f32": TypeF32, "F16": TypeF16, "bf16": TypeBF16, "Q8_0": TypeQ8_0} {
		if got, ok := EncodableType(name); !ok || got != want {
			t.Errorf("EncodableType(%q) = %v, %v; want %v", name, got, ok, want)
		}
	}
	for _, name := range []string{"", "q4_0", "f64", "i32"} {
		if got, ok := EncodableType(name); ok {
			t.Errorf("EncodableType(%q) = %v, want none", name, got)
		}
	}
}
