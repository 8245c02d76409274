package cli

import (
	"path/filepath"
	"strings"
	"testing"

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
