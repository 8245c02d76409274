package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/umad-dev/umad/debate"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/rollouts"
	"github.com/umad-dev/umad/run"
)

// probeArgs are a deterministic probe-protocol debate of two tiny architectures on three
// GSM8K problems.
func probeArgs(t *testing.T, out string, extra ...string) []string {
	return append([]string{"debate", "--protocol", "probe",
		"--agent", testmodel.GGUF(t, "qwen2"), "--agent", testmodel.GGUF(t, "llama") + ",temperature=1.0",
		"--data", sharedData(t, "gsm8k/test.jsonl"), "--limit", "3", "-k", "3", "--turns", "2", "--max-tokens", "16",
		"--prompt-limit", "1200", "--kv-type", "f32", "--flash-attn", "off", "--slots", "8", "--threads", "1",
		"--deterministic", "--out", out}, extra...)
}

// The probe protocol end to end on real models: every agent's K probes and its
// continuation at a turn share one context, the next turn's message is built from the
// continuations, the prefill is shared, the report names the protocol, the same seed
// gives the same bytes, and a run cut off mid-way resumes to the uninterrupted records.
func TestDebateProbeProtocol(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "a")
	_, stderr, err := runApp(t, probeArgs(t, run)...)
	if err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	m := regexp.MustCompile(`prompt tokens: \d+ decoded of \d+, ([\d.]+)% shared`).FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no prompt sharing line in:\n%s", stderr)
	}
	// K probes and a continuation per context: at least K of K+1 prompt decodes are shared.
	if shared, _ := strconv.ParseFloat(m[1], 64); shared < 75 {
		t.Errorf("%s%% of prompt tokens shared, want at least 75%% (one prefill for 4 samples)", m[1])
	}
	recs := readRecords(t, filepath.Join(run, "seed-1", "rollouts.jsonl.zst"))
	if len(recs) != 3 {
		t.Fatalf("%d records, want 3", len(recs))
	}
	for _, r := range recs {
		if len(r.Turns) != 2 || len(r.Continuations) != 2 || len(r.Turns[1][0]) != 3 || len(r.Continuations[1]) != 2 {
			t.Fatalf("problem %s: %d turns, %d continuations", r.Problem.ID, len(r.Turns), len(r.Continuations))
		}
		rounds := [][]string{{r.Continuations[0][0].Text, r.Continuations[0][1].Text}}
		want, err := debate.Prompt{Seed: 1}.Message(r.Problem.Question, rounds, debate.TrajectoryID{Problem: debate.ProblemKey(r.Problem)})
		if err != nil {
			t.Fatal(err)
		}
		for a := range 2 {
			c := r.Continuations[1][a]
			if c.Prompt != want {
				t.Errorf("problem %s agent %d: turn 1 prompt %q, want the message of turn 0's continuations %q", r.Problem.ID, a, c.Prompt, want)
			}
			for k, at := range r.Turns[1][a] {
				if at.Prompt != c.Prompt || len(at.Tokens) == 0 {
					t.Errorf("problem %s agent %d probe %d: another context than the continuation's", r.Problem.ID, a, k)
				}
			}
		}
	}
	var cfg map[string]any
	raw, _ := os.ReadFile(filepath.Join(run, "config.json"))
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg["protocol"] != "probe" || cfg["continue"] != "sample" {
		t.Errorf("config.json records protocol %v and continue %v (%v)", cfg["protocol"], cfg["continue"], err)
	}
	md, _ := os.ReadFile(filepath.Join(run, "report", "report.md"))
	if !strings.Contains(string(md), "Protocol: probe (the paper's Algorithm 1)") {
		t.Error("report.md does not name the probe protocol")
	}

	// The same seed again: the same bytes.
	again := filepath.Join(dir, "b")
	if _, stderr, err := runApp(t, probeArgs(t, again)...); err != nil {
		t.Fatalf("%v\n%s", err, stderr)
	}
	first, _ := os.ReadFile(filepath.Join(run, "seed-1", "rollouts.jsonl.zst"))
	second, _ := os.ReadFile(filepath.Join(again, "seed-1", "rollouts.jsonl.zst"))
	if !bytes.Equal(first, second) {
		t.Error("a second deterministic run with the same seed wrote other rollouts")
	}

	// Cut off after the first problem, with half a record torn off, then resumed.
	cut := filepath.Join(dir, "c")
	os.MkdirAll(filepath.Join(cut, "seed-1"), 0o755)
	os.WriteFile(filepath.Join(cut, "config.json"), raw, 0o644)
	w, _ := rollouts.OpenAppend(filepath.Join(cut, "seed-1", "rollouts.jsonl.zst"))
	w.Append(recs[0])
	w.Close()
	f, _ := os.OpenFile(filepath.Join(cut, "seed-1", "rollouts.jsonl.zst"), os.O_APPEND|os.O_WRONLY, 0)
	f.Write([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x00}) // the start of a zstd frame, cut off
	f.Close()
	if _, stderr, err := runApp(t, probeArgs(t, cut)...); err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	got := readRecords(t, filepath.Join(cut, "seed-1", "rollouts.jsonl.zst"))
	if len(got) != 3 || got[0].Problem != recs[0].Problem || len(got[1].Continuations) != 2 {
		t.Fatalf("resumed run holds %d records", len(got))
	}
	if !sameSummary(readSummary(t, cut), readSummary(t, run)) {
		t.Error("the resumed run's summary differs from the uninterrupted one")
	}

	// Another protocol or continuation on the run directory is refused.
	if _, _, err := runApp(t, probeArgs(t, run, "--continue", "greedy")...); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("resuming with --continue greedy: %v, want a refusal", err)
	}
}

// Protocol flags that cannot run are refused in one line, before any work.
func TestDebateProtocolRefusals(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocol", "probe", "-k", "1"}, "--protocol probe estimates each turn's answer distributions from K samples per agent; -k must be at least 2, got 1"},
		{[]string{"--protocol", "paths"}, `--protocol "paths": want one of [trajectories probe]`},
		{[]string{"--continue", "greedy"}, "--continue chooses the probe protocol's continuations; add --protocol probe"},
		{[]string{"--protocol", "probe", "--continue", "beam"}, `--continue "beam": want sample or greedy`},
	} {
		out := filepath.Join(t.TempDir(), "run")
		_, _, err := runApp(t, append([]string{"debate", "--agent", testmodel.GGUF(t, "qwen2"), "--synthetic", "2",
			"--max-tokens", "4", "--threads", "1", "--out", out}, tc.args...)...)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%v: %v, want %q", tc.args, err, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("%v: the refused debate left %s", tc.args, out)
		}
	}
}

// A config.json written before --protocol existed is a trajectories run, so it resumes.
func TestDebateConfigBeforeProtocol(t *testing.T) {
	var cfg run.DebateSettings
	if err := json.Unmarshal([]byte(`{"k": 4, "turns": 2}`), &cfg); err != nil || cfg.Protocol != "trajectories" || cfg.K != 4 {
		t.Errorf("%+v, %v", cfg, err)
	}
}

// Ctrl-C during a probe debate keeps every finished problem as written; the same
// command resumes and finishes the others.
func TestDebateProbeInterrupt(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"debate", "--protocol", "probe", "--agent", testmodel.GGUF(t, "qwen2"), "--agent", testmodel.GGUF(t, "llama"),
		"--synthetic", "40", "-k", "4", "--turns", "2", "--max-tokens", "32", "--slots", "4", "--threads", "1", "--out", out}
	cmd := umadProcess(t, 0, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(out, "seed-1", "rollouts.jsonl.zst")
	var before []json.RawMessage
	for deadline := time.Now().Add(2 * time.Minute); len(before) < 2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no problem finished:\n%s", stderr.String())
		}
		before = before[:0]
		rollouts.Read(path, func(l []byte) error { before = append(before, append(json.RawMessage(nil), l...)); return nil })
	}
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); exitCode(err) != 130 {
		t.Fatalf("interrupted debate: %v, want exit 130 (did it finish first?)\n%s", err, stderr.String())
	}
	if code, stderr := runUmadProcess(t, 0, args...); code != 0 {
		t.Fatalf("resume: exit %d\n%s", code, stderr)
	}
	var after []string
	if _, err := rollouts.Read(path, func(l []byte) error { after = append(after, string(l)); return nil }); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for _, l := range after {
		var r debate.Record
		if err := json.Unmarshal([]byte(l), &r); err != nil || seen[r.Index] || len(r.Continuations) != 2 {
			t.Fatalf("record of problem %d: %v, seen before %v, %d continuations", r.Index, err, seen[r.Index], len(r.Continuations))
		}
		seen[r.Index] = true
	}
	if len(seen) != 40 {
		t.Errorf("%d problems after resuming, want 40", len(seen))
	}
	for i, l := range before {
		if !slices.Contains(after, string(l)) {
			t.Errorf("record %d written before the interrupt changed or was lost", i)
		}
	}
}
