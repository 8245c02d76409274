package sysmem

import (
	"runtime"
	"testing"
)

func TestKVCache(t *testing.T) {
	// Qwen2.5-3B: 36 layers, 2 KV heads of 128 + 128.
	k := KVCache{Layers: 36, KVHeads: 2, HeadK: 128, HeadV: 128, NCtx: 16 * 1000, Seqs: 16, Type: "f16"}
	if c := k.Cells(); c != 16*1024 {
		t.Errorf("16 streams of 1,000 cells: %d cells, want each padded to 1,024", c)
	}
	if b := k.Bytes(); b != 16*1024*36*2*256*2 {
		t.Errorf("f16 KV: %v bytes", b)
	}
	k.Unified = true
	if c := k.Cells(); c != 16000 {
		t.Errorf("a unified cache is not padded per sequence: %d cells", c)
	}
	k.Type = "q8_0"
	if b := k.Bytes(); b != 16000*36*2*256*34.0/32 {
		t.Errorf("q8_0 KV: %v bytes", b)
	}
	if ElemBytes("q4") != 0 {
		t.Error("an unknown type has a size")
	}
}

func TestAvailable(t *testing.T) {
	n, ok := Available()
	if runtime.GOOS == "linux" && (!ok || n <= 0) {
		t.Errorf("MemAvailable: %d, %v", n, ok)
	}
}

// The high-water mark restarts at the present size and grows with what is touched.
func TestPeakRSS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("Linux's /proc only")
	}
	if err := ResetPeakRSS(); err != nil {
		t.Fatal(err)
	}
	before, err := PeakRSS()
	if err != nil || before <= 0 {
		t.Fatalf("peak RSS %d, %v", before, err)
	}
	buf := make([]byte, 64<<20)
	for i := range buf {
		buf[i] = 1
	}
	after, err := PeakRSS()
	if err != nil || after < before+60<<20 {
		t.Errorf("after touching 64 MiB: peak %d, was %d (%v)", after, before, err)
	}
	runtime.KeepAlive(buf)
}
