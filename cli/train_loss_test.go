package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/run"
	"github.com/umad-dev/umad/trainer"
)

// `umad train --help` lists every policy loss, one line each with what it does and its
// defaults, and --loss names them.
func TestTrainHelpListsLosses(t *testing.T) {
	stdout, _, err := runApp(t, "train", "--help")
	if err != nil {
		t.Fatal(err)
	}
	help := strings.Join(strings.Fields(stdout), " ")
	for _, line := range strings.Split(strings.TrimRight(trainer.LossHelp(), "\n"), "\n") {
		if !strings.Contains(help, strings.Join(strings.Fields(line), " ")) {
			t.Errorf("help lacks %q", line)
		}
	}
	if !strings.Contains(help, "policy loss: "+strings.Join(trainer.LossNames(), ", ")) {
		t.Errorf("--loss does not list the losses:\n%s", stdout)
	}
}

// An unknown --loss is refused before anything is written.
func TestTrainUnknownLoss(t *testing.T) {
	out := filepath.Join(t.TempDir(), "run")
	_, _, err := runApp(t, trainArgs(t, out, "1", "--loss", "foo")...)
	if err == nil || !strings.Contains(err.Error(), `--loss: unknown policy loss "foo" (want ppo`) {
		t.Fatalf("got %v", err)
	}
}

// --loss picks the policy loss, which trains end to end, and its clip range and aggregation
// default to the loss's own; a flag given overrides them, and a dual clip is refused for a
// loss that has none.
func TestTrainLossSettings(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want trainer.PolicyLoss
	}{
		{[]string{"--loss", "gspo"}, trainer.PolicyLoss{Loss: "gspo", ClipLow: 3e-4, ClipHigh: 4e-4, Agg: "seq-mean-token-mean"}},
		{[]string{"--loss", "gspo", "--clip-high", "0.001", "--loss-agg", "token-mean"}, trainer.PolicyLoss{Loss: "gspo", ClipLow: 3e-4, ClipHigh: 0.001, Agg: "token-mean"}},
		{[]string{"--loss", "cispo"}, trainer.PolicyLoss{Loss: "cispo", ClipLow: 1, ClipHigh: 0.28, Agg: "token-mean"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			if _, stderr, err := runApp(t, trainArgs(t, out, "1", append([]string{"--val-synthetic", "0"}, tc.args...)...)...); err != nil {
				t.Fatalf("train: %v\n%s", err, stderr)
			}
			b, err := os.ReadFile(filepath.Join(out, "config.json"))
			if err != nil {
				t.Fatal(err)
			}
			var rc run.TrainSettings
			if err := json.Unmarshal(b, &rc); err != nil {
				t.Fatal(err)
			}
			c := rc.Trainer
			if got := (trainer.PolicyLoss{Loss: c.Loss, ClipLow: c.ClipLow, ClipHigh: c.ClipHigh, ClipC: c.ClipC, Agg: c.Agg}); got != tc.want {
				t.Errorf("run with %+v, want %+v", got, tc.want)
			}
		})
	}
	for _, tc := range []struct{ args, want string }{
		{"--loss gspo --clip-c 3", "--clip-c is PPO's dual clip; --loss gspo has none"},
		{"--loss cispo --clip-low 1.5", "--clip-low must be in [0, 1] (1: no lower bound), got 1.5"},
		{"--loss gspo --clip-low 1", "--clip-low must be in [0, 1), got 1"},
	} {
		out := filepath.Join(t.TempDir(), "run")
		_, _, err := runApp(t, trainArgs(t, out, "1", strings.Fields(tc.args)...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.args, err, tc.want)
		}
	}
}
