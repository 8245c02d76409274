package llama_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/llama"
)

// layout is where one target sequence is decoded: its slot, the context's slots and
// threads, and how many companion sequences (each with a prompt of companionLen tokens)
// share its batches.
type layout struct {
	slots, slot, companions, companionLen, threads int
	kv                                             llama.KVType
	fa                                             llama.FlashAttn
}

func (l layout) String() string {
	return fmt.Sprintf("slots=%d slot=%d companions=%d(len %d) threads=%d kv=%s fa=%s",
		l.slots, l.slot, l.companions, l.companionLen, l.threads, l.kv, l.fa)
}

// trace decodes the target (an 8-token prompt, then 6 fed tokens, one per step) under
// the layout and returns its logits at each step.
func trace(t *testing.T, m *llama.Model, l layout) [][]float32 {
	t.Helper()
	c, err := m.NewContext(llama.ContextParams{NCtx: l.slots * 256, NSeqMax: l.slots, Threads: l.threads, KVType: l.kv, FlashAttn: l.fa})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	b, _ := llama.NewBatch(512, 1)
	defer b.Close()
	prompt := []int32{10, 11, 12, 13, 14, 15, 16, 17}
	feed := []int32{30, 31, 32, 33, 34, 35}
	var others []int32 // the companions' slots: the lowest ones other than the target's
	for s := 0; len(others) < l.companions; s++ {
		if s != l.slot {
			others = append(others, int32(s))
		}
	}
	var out [][]float32
	for step := 0; step <= len(feed); step++ {
		b.Clear()
		var row int
		if step == 0 {
			for i, tok := range prompt {
				r, _ := b.Add(tok, i, []int32{int32(l.slot)}, i == len(prompt)-1)
				row = r
			}
			for n, s := range others {
				for i := range l.companionLen {
					b.Add(int32(40+n+i), i, []int32{s}, i == l.companionLen-1)
				}
			}
		} else {
			row, _ = b.Add(feed[step-1], len(prompt)+step-1, []int32{int32(l.slot)}, true)
			for n, s := range others {
				b.Add(int32(50+n), l.companionLen+step-1, []int32{s}, true)
			}
		}
		if err := c.Decode(b); err != nil {
			t.Fatal(err)
		}
		logits, err := c.Logits(row)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, append([]float32(nil), logits...))
	}
	return out
}

// diff counts the logits that differ in any bit, and the largest difference.
func diff(a, b [][]float32) (n int, maxd float64) {
	for s := range a {
		for v := range a[s] {
			if math.Float32bits(a[s][v]) != math.Float32bits(b[s][v]) {
				n++
				maxd = max(maxd, math.Abs(float64(a[s][v]-b[s][v])))
			}
		}
	}
	return n, maxd
}

// TestBatchInvariance checks that no change of a sequence's batch moves its logits in any
// bit (bench/RESULTS.md, batch invariance): not the slot, the slot count, the threads, the
// other sequences' number and lengths, nor whether its micro-batch has one row or several.
// ggml's CPU backend would multiply a micro-batch of several rows with llamafile's
// tinyBLAS and one of a single row with its own vec_dot, which sum in another order;
// build.sh compiles ggml without tinyBLAS, and this test fails if that stops holding (a
// new llama.cpp pin, a build without build.sh's flags).
func TestBatchInvariance(t *testing.T) {
	if strings.Contains(llama.SystemInfo(), "LLAMAFILE = 1") {
		t.Errorf("llama.cpp was built with llamafile's tinyBLAS (%s): build with ./build.sh, or eval \"$(./build.sh env)\" before go test", llama.SystemInfo())
	}
	m := load(t, "qwen2")
	for _, mode := range []struct {
		kv llama.KVType
		fa llama.FlashAttn
	}{{llama.KVF16, llama.FlashAuto}, {llama.KVF32, llama.FlashOff}} {
		base := layout{slots: 4, companions: 1, companionLen: 8, threads: 1, kv: mode.kv, fa: mode.fa}
		ref := trace(t, m, base)
		vary := func(f func(*layout)) layout {
			l := base
			f(&l)
			return l
		}
		for _, l := range []layout{
			vary(func(l *layout) { l.slots = 8 }),
			vary(func(l *layout) { l.threads = 2 }),
			vary(func(l *layout) { l.companions = 3 }),
			vary(func(l *layout) { l.companions = 0 }),    // every decode step a 1-row micro-batch
			vary(func(l *layout) { l.companionLen = 40 }), // the prompt's logits row alone in its micro-batch
			vary(func(l *layout) { l.companionLen = 2 }),  // the same: the prompt's last tokens alone
			vary(func(l *layout) { l.slot = 3 }),          // slots 0 and 3: two micro-batches
			vary(func(l *layout) { l.slot = 1 }),          // slot 1 before slot 0 in the batch: two micro-batches
		} {
			if n, d := diff(ref, trace(t, m, l)); n > 0 {
				t.Errorf("%v: %d logits differ from %v's (largest by %g)", l, n, base, d)
			}
		}
	}
}
