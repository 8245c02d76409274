package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTrace writes events (name, ts, dur in microseconds, tid) as the plugin's call number
// seq, of the call named call.
func writeTrace(t *testing.T, dir string, seq int, call string, events ...traceEvent) {
	t.Helper()
	for i := range events {
		events[i].Phase = "X"
	}
	b, err := json.Marshal(events)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d-%s.json", seq, call)), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLastStepProfile(t *testing.T) {
	dir := t.TempDir()
	// Step 1: ops that must not count.
	writeTrace(t, dir, 0, "logprobs", traceEvent{Name: "aten::old", TS: 0, Dur: 1e6, TID: 1})
	writeTrace(t, dir, 1, "optim_step", traceEvent{Name: "aten::old", TS: 0, Dur: 1e6, TID: 1})
	// Step 2: a forward whose linear holds a matmul, then a loss on two threads and a step.
	writeTrace(t, dir, 2, "logprobs",
		traceEvent{Name: "aten::linear", TS: 10, Dur: 100, TID: 1},
		traceEvent{Name: "aten::mm", TS: 20, Dur: 70, TID: 1},
		traceEvent{Name: "aten::add", TS: 120, Dur: 10, TID: 1})
	writeTrace(t, dir, 3, "policy_loss",
		traceEvent{Name: "aten::mm", TS: 0, Dur: 50, TID: 1},
		traceEvent{Name: "MmBackward0", TS: 60, Dur: 40, TID: 2},
		traceEvent{Name: "aten::mm", TS: 65, Dur: 30, TID: 2})
	writeTrace(t, dir, 4, "optim_step", traceEvent{Name: "aten::mul_", TS: 0, Dur: 20, TID: 1})
	phases, err := LastStepProfile(dir)
	if err != nil {
		t.Fatal(err)
	}
	near := func(what string, got, want float64) {
		if math.Abs(got-want) > 1e-12 {
			t.Errorf("%s = %g, want %g", what, got, want)
		}
	}
	lp, up := phases[0], phases[1]
	if lp.Name != "log-probs" || lp.Calls != 1 || up.Name != "update" || up.Calls != 2 {
		t.Fatalf("phases %+v", phases)
	}
	near("log-probs wall", lp.Seconds, 120e-6) // 10 to 130
	ops := map[string]OpTime{}
	for _, o := range lp.Ops {
		ops[o.Name] = o
	}
	near("linear self", ops["aten::linear"].Seconds, 30e-6)
	near("mm self", ops["aten::mm"].Seconds, 70e-6)
	near("untraced", lp.Untraced(), 10e-6) // 110 to 120
	if lp.Ops[0].Name != "aten::mm" {
		t.Errorf("ops not by self time: %+v", lp.Ops)
	}
	ops = map[string]OpTime{}
	for _, o := range up.Ops {
		ops[o.Name] = o
	}
	if ops["aten::old"].Calls != 0 {
		t.Errorf("step 1's ops counted: %+v", up.Ops)
	}
	near("update mm", ops["aten::mm"].Seconds, 80e-6) // one on each thread
	near("backward self", ops["MmBackward0"].Seconds, 10e-6)
	if ops["aten::mm"].Calls != 2 {
		t.Errorf("mm calls %d, want 2", ops["aten::mm"].Calls)
	}
	near("update wall", up.Seconds, 120e-6) // 100 + 20
	table := ProfileTable(phases, 1)
	for _, want := range []string{"| aten::mm | 1 | 0.0001 | 58.3% |", "| 2 other ops | 2 |", "| outside every op | - |"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
}

func TestLastStepProfileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := LastStepProfile(dir); err == nil || !strings.Contains(err.Error(), "no optimizer step was traced") {
		t.Errorf("empty directory: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "000000-optim_step.json"), []byte("[{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LastStepProfile(dir); err == nil || !strings.Contains(err.Error(), "not a profiler trace") {
		t.Errorf("a cut trace: %v", err)
	}
}
