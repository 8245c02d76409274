package model

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/safetensors"
)

// BenchmarkConvert3B converts a random-weight checkpoint with Qwen2.5-3B's real shapes
// (6.2 GB of BF16) and compares it with copying the same bytes (the disk-speed baseline):
//
//	go test ./model/ -run '^$' -bench Convert3B -benchtime 1x
//
// It needs about 19 GB free in the temp directory; peak RSS (of the whole process, set-up
// included) is reported as peak-rss-MB.
func BenchmarkConvert3B(b *testing.B) {
	src := sharedTokenizers(b, "Qwen2.5-3B-Instruct")
	dir := b.TempDir()
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
		raw, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), raw, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	cfg, err := LoadHFConfig(dir)
	if err != nil {
		b.Fatal(err)
	}
	s, err := cfg.Shape()
	if err != nil {
		b.Fatal(err)
	}
	var named []safetensors.NamedTensor
	var total int64
	for _, t := range tinyTensors(s, 0) {
		n, _ := safetensors.TensorBytes(t.Shape, 2)
		total += n
		named = append(named, safetensors.NamedTensor{Name: t.Name, DType: safetensors.BF16, Shape: t.Shape, Write: randomBF16(n, t.seed)})
	}
	if err := safetensors.Write(filepath.Join(dir, safetensors.FileName), named, nil); err != nil {
		b.Fatal(err)
	}
	b.Logf("checkpoint: %.2f GB of BF16 in %s", float64(total)/1e9, dir)
	syscall.Sync() // the set-up's dirty pages must not be flushed during a timed run

	b.Run("copy", func(b *testing.B) {
		b.SetBytes(total)
		for range b.N {
			copyFile(b, filepath.Join(dir, safetensors.FileName), filepath.Join(b.TempDir(), "copy"))
		}
	})
	b.Run("hf2gguf-bf16", func(b *testing.B) {
		b.SetBytes(total)
		for range b.N {
			if err := HFToGGUF(dir, filepath.Join(b.TempDir(), "m.gguf"), HFToGGUFOptions{Type: gguf.TypeBF16}); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(peakRSSMB(b), "peak-rss-MB")
	})
	b.Run("hf2gguf-f16", func(b *testing.B) { // converts every value through float32
		b.SetBytes(total)
		for range b.N {
			if err := HFToGGUF(dir, filepath.Join(b.TempDir(), "m.gguf"), HFToGGUFOptions{Type: gguf.TypeF16}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// randomBF16 writes n bytes of small BF16 values from a xorshift stream: fast enough that
// making 6 GB does not dominate the benchmark's set-up.
func randomBF16(n int64, seed uint64) gguf.WriteFunc {
	return func(w io.Writer) error {
		x := seed | 1
		buf := make([]byte, 1<<20)
		for n > 0 {
			chunk := buf[:min(int64(len(buf)), n)]
			for i := 0; i+8 <= len(chunk); i += 8 {
				x ^= x << 13
				x ^= x >> 7
				x ^= x << 17
				// Four BF16 values with exponents around 2^-6: sign, mantissa random.
				v := x&0x807f807f807f807f | 0x3c003c003c003c00
				binary.LittleEndian.PutUint64(chunk[i:], v)
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			n -= int64(len(chunk))
		}
		return nil
	}
}

func copyFile(b *testing.B, from, to string) {
	in, err := os.Open(from)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		b.Fatal(err)
	}
	if err := out.Sync(); err != nil { // the converter syncs too
		b.Fatal(err)
	}
	if err := out.Close(); err != nil {
		b.Fatal(err)
	}
}

// peakRSSMB reads the process's peak resident set size (VmHWM) in MB.
func peakRSSMB(b *testing.B) float64 {
	raw, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Skip("no /proc/self/status")
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			return kb / 1024
		}
	}
	return 0
}
