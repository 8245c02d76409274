package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/run"
)

// burnCPU keeps every core busy until the test ends, as other jobs on the machine would.
func burnCPU(t *testing.T) {
	var stop atomic.Bool
	t.Cleanup(func() { stop.Store(true) })
	for range runtime.NumCPU() {
		go func() {
			for n := 0; !stop.Load(); n++ {
			}
		}()
	}
}

// A heterogeneous debate (two architectures, other weights, one agent with a 20k
// vocabulary and so slower steps), with no flag, gives byte-identical outputs run on a
// quiet machine and twice beside CPU-burning goroutines, and --check-determinism says so;
// a changed log-prob is found by file, line and field.
func TestDebateCheckDeterminism(t *testing.T) {
	out := t.TempDir()
	slow := filepath.Join(testmodel.TinyVocab(t, "qwen3", 20000), "model.gguf")
	runDebate := func(out string, extra ...string) string {
		var stdout, stderr bytes.Buffer
		app := App()
		app.Writer, app.ErrWriter = &stdout, &stderr
		err := app.Run(append([]string{"umad", "debate", "--agent", testmodel.GGUF(t, "qwen2"), "--agent", slow + ",temperature=1.0",
			"--synthetic", "8", "-k", "4", "--turns", "2", "--max-tokens", "16", "--slots", "8", "--threads", "1",
			"--out", out}, extra...))
		if err != nil {
			t.Fatalf("debate %v: %v\n%s", extra, err, stderr.String())
		}
		return stdout.String()
	}
	quiet := filepath.Join(out, "quiet", "run")
	runDebate(quiet)
	burnCPU(t)
	stdout := runDebate(out, "--check-determinism")
	run1, run2 := filepath.Join(out, "check-1", "run"), filepath.Join(out, "check-2", "run")
	if where, err := run.FirstDifference(quiet, run1); where != "" || err != nil {
		t.Errorf("the run beside the CPU load differs from the quiet one: %s %v", where, err)
	}
	if !strings.Contains(stdout, "agree byte for byte") {
		t.Errorf("output %q does not say the runs agree", stdout)
	}

	// Run 2 without its summary, then also with one log-prob moved in its last bit: the
	// check names the file, then the rollout (the reports are made from the rollouts).
	if err := os.Remove(filepath.Join(run2, "report", "summary.json")); err != nil {
		t.Fatal(err)
	}
	if where, _ := run.FirstDifference(run1, run2); where != "report/summary.json is in one run only" {
		t.Errorf("firstDifference = %q for a missing file", where)
	}
	file := filepath.Join("seed-1", "rollouts.jsonl.zst")
	var recs []debate.Record
	if _, err := rollouts.Read(filepath.Join(run1, file), func(l []byte) error {
		var r debate.Record
		err := json.Unmarshal(l, &r)
		recs = append(recs, r)
		return err
	}); err != nil || len(recs) != 8 {
		t.Fatalf("%d records, %v", len(recs), err)
	}
	lp := &recs[1].Turns[1][0][2].LogProbs[3]
	*lp = math.Float32frombits(math.Float32bits(*lp) + 1)
	if err := rollouts.WriteFile(filepath.Join(run2, file), recs); err != nil {
		t.Fatal(err)
	}
	where, err := run.FirstDifference(run1, run2)
	if want := "seed-1/rollouts.jsonl.zst line 2, field turns[1][0][2].logprobs[3]: "; err != nil || !strings.HasPrefix(where, want) {
		t.Errorf("firstDifference = %q, %v; want it to start with %q", where, err, want)
	}
}
