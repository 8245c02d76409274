package llama_test

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/umad-dev/umad/arch"
	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/internal/testmodel"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

func load(t *testing.T, arch string) *llama.Model {
	t.Helper()
	m, err := llama.LoadModel(testmodel.GGUF(t, arch), llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func TestLifetimes(t *testing.T) {
	m, err := llama.LoadModel(testmodel.GGUF(t, "qwen2"), llama.ModelParams{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := m.NewContext(llama.ContextParams{NCtx: 64})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err == nil {
		t.Fatal("closing a model with an open context should fail")
	}
	b, err := llama.NewBatch(8, 1)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(1, 0, []int32{0}, true); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"context closed twice": c.Close(),
		"decode after close":   c.Decode(b),
		"seq op after close":   c.SeqRemove(0, -1, -1),
	} {
		if !errors.Is(err, llama.ErrClosed) {
			t.Errorf("%s: got %v, want ErrClosed", name, err)
		}
	}
	if _, err := c.Logits(0); !errors.Is(err, llama.ErrClosed) {
		t.Errorf("logits after close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Add(1, 0, []int32{0}, true); !errors.Is(err, llama.ErrClosed) {
		t.Errorf("batch add after close: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); !errors.Is(err, llama.ErrClosed) {
		t.Errorf("model closed twice: %v", err)
	}
	if _, err := m.Tokenize("hi", false, false); !errors.Is(err, llama.ErrClosed) {
		t.Errorf("tokenize after close: %v", err)
	}
	if _, err := m.NewContext(llama.ContextParams{NCtx: 64}); !errors.Is(err, llama.ErrClosed) {
		t.Errorf("new context after close: %v", err)
	}
}

func TestTokenizeRoundTrip(t *testing.T) {
	for _, d := range arch.All {
		arch := d.Name
		m := load(t, arch)
		for _, text := range []string{"What is 12 + 7? \\boxed{19}", "héllo wörld ✓ 数学", "  spaces\n\tand tabs", ""} {
			toks, err := m.Tokenize(text, false, false)
			if err != nil {
				t.Fatal(err)
			}
			back, err := m.Detokenize(toks, false)
			if err != nil {
				t.Fatal(err)
			}
			if back != text {
				t.Errorf("%s: %q -> %v -> %q", arch, text, toks, back)
			}
		}
		// Special tokens are single ids when parsed, and plain text when not: the chat's
		// first marker, and the end of turn.
		start, end := d.Chat.Markers[0], d.Tokenizer.EOS
		toks, err := m.Tokenize(start+"user", false, true)
		if err != nil {
			t.Fatal(err)
		}
		if len(toks) < 2 || !m.IsEOG(mustToken(t, m, end)) {
			t.Errorf("%s: %suser -> %v; %s must end generation", arch, start, toks, end)
		}
		plain, _ := m.Tokenize(start, false, false)
		if len(plain) < 2 {
			t.Errorf("%s: unparsed special text should be several ordinary tokens, got %v", arch, plain)
		}
		// Invalid UTF-8 is an error, not a C++ exception; half a character decodes to U+FFFD.
		if _, err := m.Tokenize("a\xffb", false, true); err == nil {
			t.Errorf("%s: tokenizing invalid UTF-8 should fail", arch)
		}
		half, _ := m.Tokenize("é", false, false) // bytes C3 A9: two byte tokens in the tiny vocabulary
		if s, err := m.Detokenize(half[:1], false); err != nil || s != "\uFFFD" {
			t.Errorf("%s: half of é decodes to %q, %v", arch, s, err)
		}
		if _, err := m.Detokenize([]int32{int32(m.NVocab())}, false); err == nil {
			t.Errorf("%s: detokenizing an out-of-range id should fail", arch)
		}
	}
}

func mustToken(t *testing.T, m *llama.Model, special string) int32 {
	t.Helper()
	toks, err := m.Tokenize(special, false, true)
	if err != nil || len(toks) != 1 {
		t.Fatalf("%q should be one special token, got %v, %v", special, toks, err)
	}
	return toks[0]
}

func TestEOGAndSpecials(t *testing.T) {
	q := load(t, "qwen2")
	if !slices.Contains(q.EOGTokens(), mustToken(t, q, "<|im_end|>")) {
		t.Errorf("qwen2: <|im_end|> should be an end-of-generation token; EOG = %v", q.EOGTokens())
	}
	if q.Specials().AddBOS {
		t.Error("qwen2 adds no BOS")
	}
	l := load(t, "llama")
	if !slices.Contains(l.EOGTokens(), mustToken(t, l, "<|eot_id|>")) {
		t.Errorf("llama: <|eot_id|> should end generation; EOG = %v", l.EOGTokens())
	}
	if s := l.Specials(); !s.AddBOS || s.BOS != mustToken(t, l, "<|begin_of_text|>") {
		t.Errorf("llama adds BOS <|begin_of_text|>: %+v", s)
	}
	if got := q.Architecture(); got != "qwen2" {
		t.Errorf("architecture = %q", got)
	}
}

// The KV-memory operations behave as llama.cpp documents: copying a sequence makes its
// cells visible to the other, removing frees them.
func TestSequenceOps(t *testing.T) {
	m := load(t, "qwen3")
	c, err := m.NewContext(llama.ContextParams{NCtx: 256, NSeqMax: 4, KVUnified: true, KVType: llama.KVF32, FlashAttn: llama.FlashOff})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := llama.NewBatch(32, 4)
	defer b.Close()
	for i := 0; i < 5; i++ {
		if _, err := b.Add(int32(10+i), i, []int32{0}, i == 4); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	if err := c.SeqCopy(0, 2, 0, -1); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.SeqPosMax(2); p != 4 {
		t.Errorf("after copy, seq 2 ends at %d, want 4", p)
	}
	if err := c.SeqRemove(0, -1, -1); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.SeqPosMax(0); p != -1 {
		t.Errorf("after remove, seq 0 ends at %d, want -1 (empty)", p)
	}
	if p, _ := c.SeqPosMax(2); p != 4 {
		t.Errorf("removing seq 0 must leave seq 2's cells: ends at %d", p)
	}
	// Invalid inputs are errors, not llama.cpp aborts.
	b.Clear()
	b.Add(int32(m.NVocab()), 0, []int32{0}, true)
	if err := c.Decode(b); err == nil {
		t.Error("decoding an out-of-vocabulary token should fail")
	}
	b.Clear()
	b.Add(1, 0, []int32{9}, true)
	if err := c.Decode(b); err == nil {
		t.Error("decoding into an unknown sequence should fail")
	}
	if err := c.SeqCopy(0, 7, 0, -1); err == nil {
		t.Error("copying to an unknown sequence should fail")
	}
	b.Clear()
	if err := c.Decode(b); err == nil {
		t.Error("decoding an empty batch should fail")
	}
}

// Without a unified KV cache each sequence has its own stream: SeqCopy copies the whole
// stream, and the data moves before the next Decode writes anything, so a source reused
// in that same Decode still gives the copy its old cells. Partial copies and tokens in
// several sequences, which llama.cpp cannot do across streams, are errors.
func TestSeparateStreams(t *testing.T) {
	m := load(t, "qwen2")
	c, err := m.NewContext(llama.ContextParams{NCtx: 2 * 256, NSeqMax: 2, KVType: llama.KVF32, FlashAttn: llama.FlashOff})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := llama.NewBatch(32, 2)
	defer b.Close()
	prompt := []int32{10, 11, 12, 13, 14}
	for i, tok := range prompt {
		b.Add(tok, i, []int32{0}, i == len(prompt)-1)
	}
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	row, _ := c.Logits(len(prompt) - 1)
	want := slices.Clone(row)

	if err := c.SeqCopy(0, 1, 0, 3); err == nil {
		t.Error("a partial copy between streams should fail")
	}
	if err := c.SeqCopy(0, 1, -1, -1); err != nil {
		t.Fatal(err)
	}
	if p, _ := c.SeqPosMax(1); p != 4 {
		t.Errorf("after copy, seq 1 ends at %d, want 4", p)
	}
	if err := c.SeqRemove(1, 4, -1); err != nil {
		t.Fatal(err)
	}
	if err := c.SeqRemove(0, -1, -1); err != nil {
		t.Fatal(err)
	}
	// Seq 0 starts over with other tokens in the same Decode that applies the copy.
	b.Clear()
	b.Add(20, 0, []int32{0}, false)
	b.Add(21, 1, []int32{0}, false)
	i, _ := b.Add(prompt[4], 4, []int32{1}, true)
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
	got, _ := c.Logits(i)
	var maxDiff float64
	for v := range want {
		maxDiff = max(maxDiff, math.Abs(float64(got[v]-want[v])))
	}
	if maxDiff > 1e-4 {
		t.Errorf("logits after the copy differ from the source's by %g", maxDiff)
	}

	b.Clear()
	b.Add(1, 5, []int32{0, 1}, true)
	if err := c.Decode(b); err == nil {
		t.Error("a token in two sequences should fail without a unified KV cache")
	}
}

func TestContextParamErrors(t *testing.T) {
	m := load(t, "qwen2")
	for name, p := range map[string]llama.ContextParams{
		"zero context":          {NCtx: 0},
		"too many sequences":    {NCtx: 64, NSeqMax: llama.MaxSequences() + 1},
		"q8_0 without flash":    {NCtx: 64, KVType: llama.KVQ8_0, FlashAttn: llama.FlashOff},
		"unknown KV type":       {NCtx: 64, KVType: "q4"},
		"unknown flash setting": {NCtx: 64, FlashAttn: "maybe"},
	} {
		if c, err := m.NewContext(p); err == nil {
			c.Close()
			t.Errorf("%s: want an error", name)
		}
	}
	// q8_0 blocks are 32 wide, so it needs a head dimension divisible by 32 (tiny qwen3's
	// is 32, tiny qwen2's 16, which llama.cpp refuses with a clear error).
	m3 := load(t, "qwen3")
	if c, err := m.NewContext(llama.ContextParams{NCtx: 64, KVType: llama.KVQ8_0}); err == nil {
		c.Close()
		t.Error("q8_0 KV with head dimension 16: want an error")
	}
	for _, kv := range []llama.KVType{llama.KVF16, llama.KVF32, llama.KVQ8_0} {
		c, err := m3.NewContext(llama.ContextParams{NCtx: 64, KVType: kv})
		if err != nil {
			t.Errorf("KV %s: %v", kv, err)
			continue
		}
		c.Close()
	}
}

func TestBadFiles(t *testing.T) {
	dir := t.TempDir()
	notGGUF := filepath.Join(dir, "text.gguf")
	os.WriteFile(notGGUF, []byte("this is not a model"), 0o644)
	raw, err := os.ReadFile(testmodel.GGUF(t, "qwen2"))
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(dir, "truncated.gguf")
	os.WriteFile(truncated, raw[:len(raw)/2], 0o644)
	for _, p := range []string{filepath.Join(dir, "missing.gguf"), notGGUF, truncated} {
		if m, err := llama.LoadModel(p, llama.ModelParams{}); err == nil {
			m.Close()
			t.Errorf("%s: want an error", filepath.Base(p))
		}
	}
}

func TestPhysicalCores(t *testing.T) {
	if n := llama.PhysicalCores(); n < 1 {
		t.Errorf("PhysicalCores() = %d", n)
	}
}

// A context keeps its CPU worker threads for its life, asleep between decodes (so they
// leave the cores to the sampler), and Close ends them.
func TestThreadPool(t *testing.T) {
	m := load(t, "qwen2")
	threads := func() int {
		b, err := os.ReadFile("/proc/self/status") // umad runs on Linux
		if err != nil {
			t.Fatal(err)
		}
		var n int
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "Threads:"); ok {
				n, _ = strconv.Atoi(strings.TrimSpace(v))
			}
		}
		return n
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	b, _ := llama.NewBatch(64, 1)
	defer b.Close()
	decode := func(c *llama.Context) []float32 {
		b.Clear()
		for i := range 40 {
			b.Add(int32(10+i), i, []int32{0}, i == 39)
		}
		if err := c.SeqRemove(0, -1, -1); err != nil {
			t.Fatal(err)
		}
		if err := c.Decode(b); err != nil {
			t.Fatal(err)
		}
		row, _ := c.Logits(39)
		return slices.Clone(row)
	}
	one, err := m.NewContext(llama.ContextParams{NCtx: 256, Threads: 1, KVType: llama.KVF32})
	if err != nil {
		t.Fatal(err)
	}
	want := decode(one)
	one.Close()

	before := threads()
	for range 10 {
		c, err := m.NewContext(llama.ContextParams{NCtx: 256, Threads: 2, KVType: llama.KVF32})
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			got := decode(c)
			for v := range want {
				if d := math.Abs(float64(got[v] - want[v])); d > 1e-4 {
					t.Fatalf("logit %d with 2 threads differs from 1 thread by %g", v, d)
				}
			}
		}
		// Spinning workers would burn about a core each for the whole pause.
		c0 := cpu()
		time.Sleep(100 * time.Millisecond)
		if used := cpu() - c0; used > 40*time.Millisecond {
			t.Errorf("the process used %v of CPU in 100 ms idle after a decode: the workers did not sleep", used)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// Ten contexts of one worker each would leave 10 threads behind.
	if after := threads(); after > before+5 {
		t.Errorf("threads went from %d to %d over 10 contexts opened and closed", before, after)
	}
}
