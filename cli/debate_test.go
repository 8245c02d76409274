package cli

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/umad-dev/umad/cgo/llama"
	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/evalrun"
	"github.com/umad-dev/umad/internal/sharedtest"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/uncertainty"
)

func TestMain(m *testing.M) { os.Exit(testmodel.Main(m)) }

func sharedData(t *testing.T, rel string) string {
	return sharedtest.Path(t, filepath.Join("data", rel))
}

func runDebate(t *testing.T, out string, extra ...string) {
	t.Helper()
	args := []string{"umad", "debate",
		"--agent", testmodel.GGUF(t, "qwen2"), "--agent", testmodel.GGUF(t, "llama") + ",temperature=1.0",
		"--data", sharedData(t, "gsm8k/test.jsonl"), "--limit", "3",
		"-k", "4", "--turns", "3", "--max-tokens", "24", "--prompt-limit", "1200",
		"--kv-type", "f32", "--flash-attn", "off", "--slots", "8", "--out", out}
	var stdout, stderr bytes.Buffer
	app := App()
	app.Writer, app.ErrWriter = &stdout, &stderr
	if err := app.Run(append(args, extra...)); err != nil {
		t.Fatalf("debate: %v\n%s", err, stderr.String())
	}
}

func readRecords(t *testing.T, path string) []debate.Record {
	t.Helper()
	var recs []debate.Record
	torn, err := rollouts.Read(path, func(l []byte) error {
		var r debate.Record
		if err := json.Unmarshal(l, &r); err != nil {
			return err
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil || torn {
		t.Fatalf("read %s: torn=%v %v", path, torn, err)
	}
	return recs
}

type summaryJSON struct {
	uncertainty.Combined
}

func readSummary(t *testing.T, run string) uncertainty.Summary {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(run, "report", "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s summaryJSON
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	return s.Mean
}

// A debate of two different tiny architectures on real GSM8K problems: every output is
// there, the decomposition and flips are consistent, the summary agrees with the
// rollouts, a second run with the same seeds gives the same summary, and a run cut off
// mid-way and resumed ends with the same summary as the uninterrupted one.
func TestDebateEndToEnd(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "a")
	runDebate(t, run)
	for _, f := range []string{"config.json", "seed-1/rollouts.jsonl.zst", "report/summary.json", "report/report.md",
		"report/accuracy.csv", "report/uncertainty.csv", "report/flips.csv", "report/accuracy.png", "report/uncertainty.svg"} {
		if _, err := os.Stat(filepath.Join(run, f)); err != nil {
			t.Errorf("missing output %s", f)
		}
	}
	recs := readRecords(t, filepath.Join(run, "seed-1", "rollouts.jsonl.zst"))
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	var accStrict [2][3]float64
	for _, r := range recs {
		if len(r.Turns) != 3 || len(r.Turns[0]) != 2 || len(r.Turns[0][0]) != 4 {
			t.Fatalf("record shape %d x %d x %d", len(r.Turns), len(r.Turns[0]), len(r.Turns[0][0]))
		}
		if r.Turns[1][0][0].Prompt == "" || r.Turns[1][0][0].Prompt != r.Turns[1][1][0].Prompt {
			t.Error("both agents of a trajectory get the same debate message")
		}
		pts, err := uncertainty.PerProblem(evalrun.ProblemRecord(r))
		if err != nil {
			t.Fatal(err)
		}
		for _, pt := range pts {
			if math.Abs(pt.TU-(pt.EU+pt.AU)) > 1e-9 || pt.EU < 0 {
				t.Errorf("problem %s turn %d: TU %v, EU %v, AU %v", r.Problem.ID, pt.Turn, pt.TU, pt.EU, pt.AU)
			}
		}
		for a := 0; a < 2; a++ {
			for tu := 0; tu < 3; tu++ {
				n := 0
				for _, at := range r.Turns[tu][a] {
					if at.Grade.Strict {
						n++
					}
				}
				accStrict[a][tu] += float64(n) / 4 / float64(len(recs))
			}
		}
	}
	sum := readSummary(t, run)
	for _, row := range sum.Rows {
		if row.Agent >= 0 && row.Agent < 2 && row.Dataset == "gsm8k" {
			if math.Abs(row.AccStrict-accStrict[row.Agent][row.Turn]) > 1e-12 {
				t.Errorf("agent %d turn %d: summary accuracy %v, rollouts %v", row.Agent, row.Turn, row.AccStrict, accStrict[row.Agent][row.Turn])
			}
		}
		if row.Turn == 0 {
			continue
		}
		for _, f := range []uncertainty.Flips{row.FromPrevious.Strict, row.FromPrevious.Robust, row.FromStart.Strict, row.FromStart.Robust} {
			if s := f.C2C + f.C2W + f.W2C + f.W2W; math.Abs(s-1) > 1e-9 {
				t.Errorf("turn %d: flip fractions sum to %v", row.Turn, s)
			}
		}
	}

	// The same seeds again: the same summary.
	again := filepath.Join(dir, "b")
	runDebate(t, again)
	if !sameSummary(readSummary(t, again), sum) {
		t.Error("a second run with the same seeds gives another summary")
	}

	// Interrupted after the first problem, with half a record torn off, then resumed.
	cut := filepath.Join(dir, "c")
	os.MkdirAll(filepath.Join(cut, "seed-1"), 0o755)
	cfg, _ := os.ReadFile(filepath.Join(run, "config.json"))
	os.WriteFile(filepath.Join(cut, "config.json"), cfg, 0o644)
	w, _ := rollouts.OpenAppend(filepath.Join(cut, "seed-1", "rollouts.jsonl.zst"))
	w.Append(recs[0])
	w.Close()
	f, _ := os.OpenFile(filepath.Join(cut, "seed-1", "rollouts.jsonl.zst"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x00}) // the start of a zstd frame, cut off
	f.Close()
	runDebate(t, cut)
	if got := readRecords(t, filepath.Join(cut, "seed-1", "rollouts.jsonl.zst")); len(got) != 3 {
		t.Errorf("resumed run holds %d records, want 3", len(got))
	}
	if !sameSummary(readSummary(t, cut), sum) {
		t.Error("the resumed run's summary differs from the uninterrupted one")
	}

	// umad report rebuilds the same summary from the rollouts and compares runs.
	os.Remove(filepath.Join(run, "report", "summary.json"))
	app0 := App()
	app0.Writer = &bytes.Buffer{}
	if err := app0.Run([]string{"umad", "report", "--out", dir, run, again}); err != nil {
		t.Fatal(err)
	}
	if !sameSummary(readSummary(t, run), sum) {
		t.Error("umad report rebuilt another summary")
	}
	if _, err := os.Stat(filepath.Join(dir, "compare.md")); err != nil {
		t.Error("umad report of two runs wrote no comparison")
	}

	// Other flags on an existing run directory are refused.
	var stderr bytes.Buffer
	app := App()
	app.ErrWriter = &stderr
	if err := app.Run([]string{"umad", "debate", "--agent", testmodel.GGUF(t, "qwen2"), "--out", run}); err == nil {
		t.Error("resuming with other settings should fail")
	}
}

// sameSummary compares summaries exactly, except the token statistics (mean NLL,
// entropy, length, truncation and boxed rates), which may differ slightly between runs:
// llama.cpp's logits move in the last bits with the batch's composition, which depends on
// how two concurrently decoding engines interleave, and a sampled token can then change
// where two candidates are near-tied (seen once in about 15 runs of this test). Accuracy,
// majority votes, the decomposition and the flips must agree exactly.
func sameSummary(a, b uncertainty.Summary) bool {
	if len(a.Rows) != len(b.Rows) {
		return false
	}
	// Tolerances: one changed sample in the 12 a row averages moves a rate by 0.083 and a
	// mean length by up to 2 of about 20 tokens.
	rel := func(x, y, tol float64) bool {
		return math.Abs(x-y) <= tol*math.Max(1, math.Max(math.Abs(x), math.Abs(y)))
	}
	for i := range a.Rows {
		ra, rb := a.Rows[i], b.Rows[i]
		if !rel(ra.NLL, rb.NLL, 0.02) || !rel(ra.TokenEntropy, rb.TokenEntropy, 0.02) || !rel(ra.Tokens, rb.Tokens, 0.15) ||
			math.Abs(ra.Truncated-rb.Truncated) > 0.1 || math.Abs(ra.Boxed-rb.Boxed) > 0.1 {
			return false
		}
		ra.NLL, rb.NLL, ra.TokenEntropy, rb.TokenEntropy = 0, 0, 0, 0
		ra.Tokens, rb.Tokens, ra.Truncated, rb.Truncated, ra.Boxed, rb.Boxed = 0, 0, 0, 0, 0, 0
		if !reflect.DeepEqual(ra, rb) {
			return false
		}
	}
	return true
}

// A debate that cannot run as asked is refused with the reason, before any work: a RANK
// inherited from torchrun or a job system, or srun's task of several (debating only a share and reporting nothing,
// as it did, looked like success), and a sample ratio that chooses no problem.
func TestDebateRefusals(t *testing.T) {
	gguf := testmodel.GGUF(t, "qwen2")
	for _, tc := range []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"RANK", "1", "WORLD_SIZE", "2"}, nil, "RANK=1 is set (by torchrun, srun or a job system?), but umad debate starts its own ranks"},
		{[]string{"SLURM_STEP_ID", "0", "SLURM_PROCID", "1", "SLURM_NTASKS", "2"}, nil, "SLURM_PROCID=1 (srun) is set"},
		{[]string{"RANK", "0", "WORLD_SIZE", "1"}, nil, "RANK=0 is set"},
		{nil, []string{"--data", sharedData(t, "gsm8k/test.jsonl"), "--sample-ratio", "0.0001"}, "sample ratio 0.0001 chooses none of the 1319 problems"},
	} {
		t.Run(strings.Join(append(tc.env, tc.args...), " "), func(t *testing.T) {
			for i := 0; i < len(tc.env); i += 2 {
				t.Setenv(tc.env[i], tc.env[i+1])
			}
			out := filepath.Join(t.TempDir(), "run")
			args := append([]string{"debate", "--agent", gguf, "-k", "1", "--turns", "1", "--max-tokens", "4",
				"--threads", "1", "--out", out}, tc.args...)
			if tc.args == nil {
				args = append(args, "--synthetic", "2")
			}
			_, _, err := runApp(t, args...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want %q", err, tc.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Errorf("the refused debate left %s", out)
			}
		})
	}
}

// A problem too long to tokenize at all (over llama.MaxTokenizeBytes) is skipped with the
// warning of any problem longer than --prompt-limit; it ended the whole debate.
func TestDebateSkipsUntokenizableProblem(t *testing.T) {
	huge := strings.Repeat("1 + ", llama.MaxTokenizeBytes/4+1) + "1"
	var lines []byte
	for _, q := range []string{huge, "What is 2 + 3?"} {
		line, _ := json.Marshal(map[string]string{"question": q, "answer": "#### 5"})
		lines = append(append(lines, line...), '\n')
	}
	set := filepath.Join(t.TempDir(), "set.jsonl")
	if err := os.WriteFile(set, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "run")
	code, stderr := runUmadProcess(t, 0, "debate", "--agent", testmodel.GGUF(t, "qwen2"), "--data", set, "-k", "1", "--turns", "1",
		"--max-tokens", "4", "--threads", "1", "--out", out)
	if code != 0 || !strings.Contains(stderr, "problem skipped: its prompt exceeds the prompt limit") {
		t.Fatalf("exit %d\n%s", code, stderr)
	}
	if recs := readRecords(t, filepath.Join(out, "seed-1", "rollouts.jsonl.zst")); len(recs) != 1 || recs[0].Index != 1 {
		t.Errorf("%d records, want only problem 1's", len(recs))
	}
}
