package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/umad-dev/umad/gguf"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/peft"
	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
	"github.com/umad-dev/umad/trainlog"
)

// trainArgs is a tiny grpo run: 16 synthetic problems, 4 per step, 4 trajectories of at
// most 8 tokens, 4 validation problems, one thread each for llama.cpp and libtorch.
func trainArgs(t *testing.T, out string, steps string, extra ...string) []string {
	args := []string{"train", "--agent", filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"), "--algo", "grpo", "--turns", "1",
		"--synthetic", "16", "--batch", "4", "-g", "4", "--max-tokens", "8", "--prompt-limit", "512",
		"--val-synthetic", "4", "--steps", steps, "--threads", "1", "--torch-threads", "1",
		"--kv-type", "f32", "--flash-attn", "off", "--slots", "4", "--out", out}
	return append(args, extra...)
}

// stepsOf lists the step of each line.
func stepsOf(train []trainlog.StepMetrics, val []trainlog.ValMetrics) (ts, vs []int) {
	for _, l := range train {
		ts = append(ts, l.Step)
	}
	for _, l := range val {
		vs = append(vs, l.Step)
	}
	return ts, vs
}

// `umad train` writes its run directory (config, metrics, checkpoint with the agent's
// GGUF), and the same command with --resume and more --steps continues it: every step is
// logged once.
func TestTrainRunAndResume(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, trainArgs(t, out, "2")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	latest := filepath.Join(out, trainer.CheckpointsDir, "step-000002")
	agent := trainer.AgentCheckpointDir(latest, 0)
	for _, f := range []string{filepath.Join(out, "config.json"), filepath.Join(out, trainlog.File),
		filepath.Join(out, trainer.CheckpointsDir, trainer.LatestFile), filepath.Join(agent, "model.gguf"), filepath.Join(agent, "model.safetensors")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("run directory lacks %s", f)
		}
	}
	if ck, err := trainer.LatestCheckpoint(out); err != nil || ck != latest {
		t.Errorf("latest checkpoint %q (%v), want %s", ck, err, latest)
	}
	ts, vs := stepsOf(readRun(t, out))
	if !reflect.DeepEqual(ts, []int{1, 2}) || !reflect.DeepEqual(vs, []int{0, 2}) {
		t.Errorf("metrics: training steps %v, validation steps %v; want [1 2] and [0 2]", ts, vs)
	}

	// Continuing needs --resume, with the same settings; refusals change nothing.
	if _, _, err := runApp(t, trainArgs(t, out, "3")...); err == nil || !strings.Contains(err.Error(), "pass --resume") {
		t.Errorf("the same directory without --resume: %v", err)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "2", "--lr", "1e-3", "--resume")...); err == nil || !strings.Contains(err.Error(), "holds a run with other settings") {
		t.Errorf("a run with another learning rate on the same directory: %v", err)
	}
	if _, _, err := runApp(t, trainArgs(t, filepath.Join(t.TempDir(), "none"), "2", "--resume")...); err == nil || !strings.Contains(err.Error(), "holds no training run") {
		t.Errorf("--resume of nothing: %v", err)
	}

	stdout, stderr, err := runApp(t, trainArgs(t, out, "3", "--resume")...)
	if err != nil {
		t.Fatalf("resume with --steps 3: %v\n%s", err, stderr)
	}
	if !strings.Contains(stdout, "step 3/3") || strings.Contains(stdout, "step 1/3") || strings.Contains(stdout, "step 2/3") {
		t.Errorf("the resumed run trained other steps than step 3:\n%s", stdout)
	}
	ts, vs = stepsOf(readRun(t, out))
	if !reflect.DeepEqual(ts, []int{1, 2, 3}) || !reflect.DeepEqual(vs, []int{0, 2, 3}) {
		t.Errorf("metrics after the resume: training steps %v, validation steps %v; want [1 2 3] and [0 2 3]", ts, vs)
	}
}

func readRun(t *testing.T, out string) ([]trainlog.StepMetrics, []trainlog.ValMetrics) {
	t.Helper()
	train, val, err := trainlog.Read(filepath.Join(out, trainlog.File))
	if err != nil {
		t.Fatal(err)
	}
	return train, val
}

// Flags that cannot make a run fail at once, with one line that says what is wrong, and
// leave no run directory behind (so the corrected command can use the same --out).
func TestTrainFlagErrors(t *testing.T) {
	hf := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	noAnswers := writeLines(t, `{"question": "What is 2+2?", "answer": ""}`, `{"question": "What is 3+3?", "answer": ""}`)
	noLayout := writeLines(t, `{"note": "no question here"}`)
	emptyVocab := withEmptyVocabulary(t, hf)
	for _, tc := range []struct {
		why   string
		args  []string // after trainArgs with --steps 1
		noOut bool     // drop --out
		want  []string
	}{
		{"grpo with two agents", []string{"--agent", hf}, false, []string{"grpo trains one agent", "2 agents"}},
		{"no --out", nil, true, []string{"out"}},
		{"unknown --algo", []string{"--algo", "ppo"}, false, []string{`unknown algorithm "ppo"`, "grpo, ippo, umad"}},
		{"bad --agent key", []string{"--agent", hf + ",colour=red"}, false, []string{`unknown setting "colour"`}},
		{"data without answers", []string{"--data", noAnswers}, false, []string{noAnswers, "no usable problems"}},
		{"data of another layout", []string{"--data", noLayout}, false, []string{noLayout, "unknown data layout"}},
		{"unknown rollout dtype", []string{"--rollout-dtype", "q8_0"}, false, []string{"--rollout-dtype", `unknown rollout dtype "q8_0"`}},
		{"overlap other than 0 or 1", []string{"--overlap", "2"}, false, []string{"--overlap must be 0 or 1, got 2"}},
		{"negative overlap", []string{"--overlap", "-1"}, false, []string{"--overlap must be 0 or 1, got -1"}},
		{"negative LoRA rank", []string{"--lora-rank", "-1"}, false, []string{"--lora-rank must be at least 0"}},
		{"LoRA rank above the hidden size", []string{"--lora-rank", "65"}, false, []string{"--lora-rank", hf, "exceeds the model's hidden size 64"}},
		{"unknown LoRA target", []string{"--lora-rank", "4", "--lora-targets", "q,lm_head"}, false, []string{"--lora-targets", `unknown LoRA target "lm_head"`, "q,k,v,o,gate,up,down"}},
		{"NaN LoRA alpha", []string{"--lora-rank", "4", "--lora-alpha", "NaN"}, false, []string{"--lora-alpha NaN", "finite"}},
		{"negative LoRA alpha", []string{"--lora-rank", "4", "--lora-alpha", "-2"}, false, []string{"alpha must be positive and finite, got -2"}},
		{"LoRA dropout of 1", []string{"--lora-rank", "4", "--lora-dropout", "1"}, false, []string{"dropout must be in [0, 1)"}},
		{"LoRA alpha without a rank", []string{"--lora-alpha", "16"}, false, []string{"--lora-alpha needs --lora-rank"}},
		// Issue 28: refused only at the first optimizer step, after the loading and a rollout,
		// or by llama.cpp after the run directory was made.
		{"negative clip-low", []string{"--clip-low", "-1"}, false, []string{"--clip-low must be in [0, 1), got -1"}},
		{"negative clip-high", []string{"--clip-high", "-1"}, false, []string{"--clip-high must not be negative, got -1"}},
		{"dual clip below 1", []string{"--clip-c", "0.5"}, false, []string{"--clip-c must be more than 1 (0 = off), got 0.5"}},
		{"unknown loss aggregation", []string{"--loss-agg", "foo"}, false, []string{"--loss-agg", `unknown loss aggregation "foo"`}},
		{"negative learning rate", []string{"--lr", "-1"}, false, []string{"--lr must not be negative, got -1"}},
		{"learning rate beyond float32", []string{"--lr", "1e300"}, false, []string{"--lr 1e+300 does not fit the float32"}},
		{"LoRA alpha overflowing the step", []string{"--lora-rank", "4", "--lora-alpha", "1e30"}, false, []string{"--lr 1e-06 x LoRA alpha/rank 1e+30/4 is 2.5e+23", "at most 1 (lower --lr or --lora-alpha)"}},
		{"weight decay beyond float32", []string{"--weight-decay", "1e39"}, false, []string{"--weight-decay 1e+39 does not fit the float32"}},
		{"KL coefficient beyond float32", []string{"--kl-coef", "1e39"}, false, []string{"--kl-coef 1e+39 does not fit the float32"}},
		{"slots beyond llama.cpp", []string{"--slots", "300"}, false, []string{"--slots: 300 slots; llama.cpp allows 1 to"}},
		{"no such GPU", []string{"--devices", "CUDA99"}, false, []string{`--devices: device "CUDA99"`}},
		{"prompt limit beyond --ctx", []string{"--prompt-limit", "5000", "--ctx", "4096"}, false, []string{"--prompt-limit 5000 plus --max-tokens 8 is more than --ctx 4096"}},
		{"tokenizer without a vocabulary", []string{"--algo", "ippo", "--agent", emptyVocab}, false, []string{emptyVocab, "empty vocabulary"}},
		{"prompt limit beyond the model's context", []string{"--prompt-limit", "1000000"}, false, []string{"--prompt-limit 1000000 plus --max-tokens 8 is more than the 4096 tokens of context " + hf}},
	} {
		t.Run(tc.why, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := trainArgs(t, out, "1", tc.args...)
			if tc.noOut {
				args = args[:len(args)-len(tc.args)-2]
			}
			_, _, err := runApp(t, args...)
			checkRefused(t, err, out, tc.want)
		})
	}
}

// checkRefused checks that a run was refused at once in one line that says every want,
// leaving no run directory at out.
func checkRefused(t *testing.T, err error, out string, want []string) {
	t.Helper()
	if err == nil {
		t.Fatal("the run started")
	}
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("the error spans lines: %q", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if _, serr := os.Stat(out); serr == nil {
		t.Errorf("a failed start left %s behind", out)
	}
}

// withEmptyVocabulary copies the HF directory with its tokenizer.json's model.vocab emptied.
func withEmptyVocabulary(t *testing.T, hf string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "hf")
	if err := os.CopyFS(dir, os.DirFS(hf)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var tok map[string]any
	if err := json.Unmarshal(b, &tok); err != nil {
		t.Fatal(err)
	}
	tok["model"].(map[string]any)["vocab"] = map[string]int{}
	if b, err = json.Marshal(tok); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A resumed run keeps checkpointing after --keep prunes the checkpoint it resumed from: the
// tokenizer and config travel with the weights, not with a directory that may be gone
// (issue 18, item 2; the third checkpoint after the resume failed).
func TestResumeSurvivesPruning(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := func(steps string, extra ...string) []string {
		return trainArgs(t, out, steps, append([]string{"--val-synthetic", "0", "--save-every", "1", "--keep", "2"}, extra...)...)
	}
	if _, stderr, err := runApp(t, args("1")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	if _, stderr, err := runApp(t, args("5", "--resume")...); err != nil {
		t.Fatalf("resume to step 5 with --keep 2: %v\n%s", err, stderr)
	}
	for _, step := range []string{"step-000001", "step-000003"} {
		if _, err := os.Stat(filepath.Join(out, trainer.CheckpointsDir, step)); err == nil {
			t.Errorf("%s was not pruned", step)
		}
	}
	if ck, err := trainer.LatestCheckpoint(out); err != nil || filepath.Base(ck) != "step-000005" {
		t.Fatalf("latest checkpoint %q, %v; want step-000005", ck, err)
	}
	ck, _ := trainer.LatestCheckpoint(out)
	if _, err := os.Stat(filepath.Join(trainer.AgentCheckpointDir(ck, 0), "tokenizer.json")); err != nil {
		t.Errorf("the last checkpoint lacks its tokenizer: %v", err)
	}
}

// A run directory whose config.json predates the named grading mode ("robust": false
// instead of "reward": "strict"), the sync mode (no "sync"), LoRA (no "lora" key), the
// trainer's dtype (no "dtype": f32) and the overlap (no "overlap": 0) still resumes.
func TestResumeRunFromBeforeRewardModes(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := func(steps string, extra ...string) []string {
		return trainArgs(t, out, steps, append([]string{"--val-synthetic", "0"}, extra...)...)
	}
	if _, stderr, err := runApp(t, args("1")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	path := filepath.Join(out, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(b), `"reward": "strict"`, `"robust": false`, 1)
	if old == string(b) {
		t.Fatalf("config.json has no reward mode to rewrite:\n%s", b)
	}
	noSync := strings.Replace(old, `"sync": "inplace",`, "", 1)
	if noSync == old {
		t.Fatalf("config.json has no sync mode to remove:\n%s", b)
	}
	old = noSync
	var cfg map[string]json.RawMessage
	var tr map[string]json.RawMessage
	if err := json.Unmarshal([]byte(old), &cfg); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(cfg["trainer"], &tr); err != nil {
		t.Fatal(err)
	}
	if _, ok := tr["lora"]; !ok {
		t.Fatalf("config.json has no LoRA settings to remove:\n%s", b)
	}
	delete(tr, "lora")
	if string(tr["dtype"]) != `"f32"` {
		t.Fatalf("config.json has no f32 dtype to remove:\n%s", b)
	}
	delete(tr, "dtype")
	if string(tr["overlap"]) != "0" {
		t.Fatalf("config.json has no overlap 0 to remove:\n%s", b)
	}
	delete(tr, "overlap")
	if cfg["trainer"], err = json.Marshal(tr); err != nil {
		t.Fatal(err)
	}
	if b, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	old = string(b)
	if err := os.WriteFile(path, []byte(old), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, stderr, err := runApp(t, args("2", "--resume")...); err != nil {
		t.Fatalf("resume of a pre-reward-mode run: %v\n%s", err, stderr)
	}
}

// A run whose rollout dtype is not this machine's default (bf16, as on a GPU, resumed on
// this CPU) resumes with its --rollout-dtype, and without it is refused with that advice
// rather than the probe tolerance that follows from the dtype.
func TestResumeOtherRolloutDType(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := func(steps string, extra ...string) []string {
		return trainArgs(t, out, steps, append([]string{"--val-synthetic", "0"}, extra...)...)
	}
	if _, stderr, err := runApp(t, args("1", "--rollout-dtype", "bf16")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	if _, _, err := runApp(t, args("2", "--resume")...); err == nil || !strings.Contains(err.Error(), "resume it with --rollout-dtype bf16") {
		t.Errorf("resume at the default rollout dtype: %v, want the advice to pass --rollout-dtype bf16", err)
	}
	if _, stderr, err := runApp(t, args("2", "--resume", "--rollout-dtype", "bf16")...); err != nil {
		t.Errorf("resume with --rollout-dtype bf16: %v\n%s", err, stderr)
	}
}

// --reward picks the answer checker of the rewards and is saved with the run; --robust is
// its shorthand, and a contradiction or an unknown checker is refused.
func TestTrainRewardMode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, trainArgs(t, out, "1", "--val-synthetic", "0", "--reward", "robust")...); err != nil {
		t.Fatalf("train --reward robust: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "config.json")); !strings.Contains(string(b), `"reward": "robust"`) {
		t.Errorf("config.json does not record the robust reward:\n%s", b)
	}
	for _, bad := range [][]string{{"--reward", "loose"}, {"--reward", "strict", "--robust"}} {
		if _, _, err := runApp(t, trainArgs(t, filepath.Join(t.TempDir(), "x"), "1", bad...)...); err == nil || !strings.Contains(err.Error(), "--r") {
			t.Errorf("%v: %v, want an error naming the flag", bad, err)
		}
	}
}

// --sync picks how weights reach llama.cpp and is saved with the run; an unknown mode is
// refused.
func TestTrainSyncMode(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, trainArgs(t, out, "1", "--val-synthetic", "0", "--sync", "file")...); err != nil {
		t.Fatalf("train --sync file: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "config.json")); !strings.Contains(string(b), `"sync": "file"`) {
		t.Errorf("config.json does not record the file sync:\n%s", b)
	}
	if _, _, err := runApp(t, trainArgs(t, filepath.Join(t.TempDir(), "x"), "1", "--sync", "mmap")...); err == nil || !strings.Contains(err.Error(), "--sync") {
		t.Errorf("--sync mmap: %v, want an error naming the flag", err)
	}
}

// --overlap 1 trains, is saved with the run, checkpoints the next step's rollout and
// resumes; a resume must keep the overlap.
func TestTrainOverlap(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	if _, stderr, err := runApp(t, trainArgs(t, out, "2", "--val-synthetic", "0", "--overlap", "1")...); err != nil {
		t.Fatalf("train --overlap 1: %v\n%s", err, stderr)
	}
	if b, _ := os.ReadFile(filepath.Join(out, "config.json")); !strings.Contains(string(b), `"overlap": 1`) {
		t.Errorf("config.json does not record the overlap:\n%s", b)
	}
	ck, err := trainer.LatestCheckpoint(out)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ck, trainer.NextRolloutFile)); err != nil {
		t.Errorf("the last checkpoint holds no next rollout: %v", err)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "3", "--val-synthetic", "0", "--resume")...); err == nil || !strings.Contains(err.Error(), "trainer.overlap: 1 there, 0 here") {
		t.Errorf("resuming an overlapped run without --overlap: %v", err)
	}
	if _, stderr, err := runApp(t, trainArgs(t, out, "3", "--val-synthetic", "0", "--overlap", "1", "--resume")...); err != nil {
		t.Fatalf("resume with --overlap 1: %v\n%s", err, stderr)
	}
	train, val := readRun(t, out)
	if ts, _ := stepsOf(train, val); len(ts) != 3 || ts[2] != 3 {
		t.Errorf("steps %v, want 1 2 3", ts)
	}
}

// `umad train --lora-rank` trains adapters: the checkpoint is a PEFT directory naming the
// base (no copy of it) with a merged GGUF, config.json records the settings, llama.cpp's
// copy of the base has the rollout dtype, and the run resumes from it.
func TestTrainLoRARunAndResume(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	args := func(steps string, extra ...string) []string {
		return trainArgs(t, out, steps, append([]string{"--val-synthetic", "0", "--lora-rank", "4", "--lora-targets", "q,v,down", "--lr", "1e-2", "--rollout-dtype", "bf16"}, extra...)...)
	}
	if _, stderr, err := runApp(t, args("1")...); err != nil {
		t.Fatalf("train: %v\n%s", err, stderr)
	}
	agent := trainer.AgentCheckpointDir(filepath.Join(out, trainer.CheckpointsDir, "step-000001"), 0)
	for _, f := range []string{"adapter_config.json", "adapter_model.safetensors", "optimizer.safetensors", "model.gguf", "config.json"} {
		if _, err := os.Stat(filepath.Join(agent, f)); err != nil {
			t.Errorf("the LoRA checkpoint lacks %s", f)
		}
	}
	if _, err := os.Stat(filepath.Join(agent, "model.safetensors")); err == nil {
		t.Error("the LoRA checkpoint copied the base weights")
	}
	// The base llama.cpp holds follows the rollout dtype (issue 33).
	base, err := gguf.OpenGGUF(filepath.Join(out, "sync", "agent-0", "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	for _, ti := range base.Tensors {
		if len(ti.Dims) == 2 && ti.Type != gguf.TypeBF16 {
			t.Errorf("the rollout base's matrix %s is %v, want the rollout dtype, bf16", ti.Name, ti.Type)
			break
		}
	}
	if b, _ := os.ReadFile(filepath.Join(out, "config.json")); !strings.Contains(string(b), `"rank": 4`) || !strings.Contains(string(b), `"alpha": 8`) {
		t.Errorf("config.json does not record rank 4 and the default alpha 8:\n%s", b)
	}
	if _, _, err := runApp(t, trainArgs(t, out, "2", "--val-synthetic", "0", "--rollout-dtype", "bf16", "--resume")...); err == nil || !strings.Contains(err.Error(), "other settings") {
		t.Errorf("resuming a LoRA run without --lora-rank: %v", err)
	}
	if _, stderr, err := runApp(t, args("2", "--resume")...); err != nil {
		t.Fatalf("resume: %v\n%s", err, stderr)
	}
	if ts, _ := stepsOf(readRun(t, out)); !reflect.DeepEqual(ts, []int{1, 2}) {
		t.Errorf("training steps %v, want [1 2]", ts)
	}
}

// extremePEFT is the adapter at from with every weight 3e38: finite, but its products are
// not.
func extremePEFT(t *testing.T, from string) string {
	t.Helper()
	a, err := peft.Read(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range a.Pairs {
		for _, v := range [][]float32{p.A, p.B} {
			for i := range v {
				v[i] = 3e38
			}
		}
	}
	dir := filepath.Join(t.TempDir(), "extreme")
	if err := a.WritePEFT(dir); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A start that fails after the run directory was made (a starting adapter of finite but
// extreme weights, found by the first sync's probe) names the adapter and removes what it
// made, so that the corrected command runs on the same --out; an --out that existed before
// stays, and so does a run with a checkpoint that fails to resume (issue 28, items 22, 23).
func TestTrainFailedStartLeavesNothing(t *testing.T) {
	base := filepath.Join(testmodel.Tiny(t, "qwen2"), "hf")
	good := peftOn(t, base, true)
	bad := extremePEFT(t, good)
	out := filepath.Join(t.TempDir(), "run")
	_, _, err := runApp(t, trainFrom(t, bad, out)...)
	if err == nil || !strings.Contains(err.Error(), "the weights of the starting adapter "+bad+" are not usable") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("a starting adapter of 3e38 weights: %v; want one line naming it", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the failed start left %s (%v)", out, err)
	}

	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, trainFrom(t, bad, out)...); err == nil {
		t.Fatal("the extreme adapter trained")
	}
	if entries, err := os.ReadDir(out); err != nil || len(entries) != 0 {
		t.Errorf("the failed start in an existing directory left %v (%v); want it there and empty", entries, err)
	}
	if _, stderr, err := runApp(t, trainFrom(t, good, out)...); err != nil {
		t.Fatalf("the corrected command: %v\n%s", err, stderr)
	}

	ck := trainer.AgentCheckpointDir(filepath.Join(out, trainer.CheckpointsDir, "step-000001"), 0)
	if err := os.Remove(filepath.Join(ck, "optimizer.safetensors")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := runApp(t, trainFrom(t, good, out, "--steps", "2", "--resume")...); err == nil || !strings.Contains(err.Error(), "no optimizer state") {
		t.Fatalf("resuming without the optimizer state: %v", err)
	}
	for _, f := range []string{filepath.Join(out, "config.json"), filepath.Join(out, trainlog.File), filepath.Join(ck, "adapter_model.safetensors")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("the failed resume removed %s", f)
		}
	}
}

// The rollout dtype is bf16 with llama.cpp on a GPU or a bf16 trainer, else f32 (bf16
// decodes no faster on this CPU), unless set; a dtype other than the trainer's, or
// --overlap 1, turns truncated importance sampling on, and any bf16 or f16 side widens the
// probe tolerance, each unless its own flag is given.
func TestRolloutSettings(t *testing.T) {
	for _, tc := range []struct {
		args     []string
		rollout  trainer.RolloutDType
		tol, tis float64
	}{
		{nil, trainer.RolloutF32, run.ProbeTolF32, 0},
		{[]string{"--gpu-layers", "99"}, trainer.RolloutBF16, run.ProbeTolBF16, run.TISCap},
		{[]string{"--gpu-layers", "99", "--rollout-dtype", "f32"}, trainer.RolloutF32, run.ProbeTolF32, 0},
		{[]string{"--gpu-layers", "0"}, trainer.RolloutF32, run.ProbeTolF32, 0},
		{[]string{"--dtype", "bf16"}, trainer.RolloutBF16, run.ProbeTolBF16, 0},
		{[]string{"--rollout-dtype", "bf16"}, trainer.RolloutBF16, run.ProbeTolBF16, run.TISCap},
		{[]string{"--rollout-dtype", "BF16", "--tis-cap", "0", "--probe-tol", "1e-3"}, trainer.RolloutBF16, 1e-3, 0},
		{[]string{"--rollout-dtype", "f16", "--dtype", "bf16"}, trainer.RolloutF16, run.ProbeTolBF16, run.TISCap},
		{[]string{"--rollout-dtype", "f32", "--dtype", "bf16"}, trainer.RolloutF32, run.ProbeTolBF16, run.TISCap},
		{[]string{"--overlap", "1"}, trainer.RolloutF32, run.ProbeTolF32, run.TISCap},
		{[]string{"--overlap", "1", "--tis-cap", "0"}, trainer.RolloutF32, run.ProbeTolF32, 0},
	} {
		r, err := resolveTrainArgs(t, tc.args...)
		tr := r.Trainer
		if err != nil || tr.RolloutDType != tc.rollout || tr.ProbeTol != tc.tol || tr.TISCap != tc.tis {
			t.Errorf("%v: rollout %s, probe tolerance %g, TIS cap %g (%v); want %s, %g, %g", tc.args, tr.RolloutDType, tr.ProbeTol, tr.TISCap, err, tc.rollout, tc.tol, tc.tis)
		}
	}
}
