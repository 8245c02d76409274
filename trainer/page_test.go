package trainer

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/browsertest"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
	"github.com/umad-dev/umad/report"
	"github.com/umad-dev/umad/trainlog"
)

// A run calls Live.Page once its metrics lines are on disk: after the first validation,
// each step and the last validation (live), and as it ends (not live). Its page, written
// by the report's writer and kept as it stood after step 1 of 2, opens in headless
// chromium as a live page of step 1.
func TestPageFollowsTheLog(t *testing.T) {
	browsertest.Chromium(t)
	rt := torchtest.Open(t)
	cfg := demoConfig(t, "grpo", []string{filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")}, 2)
	cfg.ValProblems = cfg.ValProblems[:4]
	type call struct {
		live       bool
		train, val int // the log's lines when the page was asked for
	}
	var calls []call
	mid := filepath.Join(t.TempDir(), "mid-run.html")
	page := func(out string, live bool) error {
		train, val, err := trainlog.Read(filepath.Join(out, trainlog.File))
		if err != nil {
			return err
		}
		calls = append(calls, call{live, len(train), len(val)})
		if err := report.WriteTrainingPage(out, live); err != nil {
			t.Errorf("the page after %d steps and %d validations: %v", len(train), len(val), err) // the trainer only logs it
			return err
		}
		if len(train) == 1 && len(val) == 1 { // after step 1, before step 2
			page, err := os.ReadFile(filepath.Join(out, "report", report.PageFile))
			if err != nil {
				return err
			}
			return os.WriteFile(mid, page, 0o644)
		}
		return nil
	}
	if err := Run(context.Background(), cfg, Live{Torch: rt, Page: page}); err != nil {
		t.Fatal(err)
	}
	want := []call{{true, 0, 1}, {true, 1, 1}, {true, 2, 1}, {true, 2, 2}, {false, 2, 2}}
	if !reflect.DeepEqual(calls, want) {
		t.Errorf("page calls (live, train lines, validation lines) %v, want %v", calls, want)
	}
	dom := browsertest.DumpDOM(t, mid, "")
	for _, s := range []string{`http-equiv="refresh"`, "Running: step 1 is the latest logged", "slowest phase: <b>", "<svg"} {
		if !strings.Contains(dom, s) {
			t.Errorf("the page written mid-run lacks %q", s)
		}
	}
}
