package run

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/umad-dev/umad/data"
)

// A warm start's pairs come from one source, and the experts' settings only with their
// task; the errors name the flags.
func TestSFTPairs(t *testing.T) {
	experts := data.SyntheticConfig{Terms: 2, MaxOperand: 3, Ops: "+*", Task: data.TaskExperts}
	for _, c := range []struct {
		name string
		edit func(*SFTSettings)
		want string
	}{
		{"both", func(s *SFTSettings) { s.Data, s.Synthetic = "pairs.jsonl", 4 }, "give --data or --synthetic, not both"},
		{"neither", func(s *SFTSettings) {}, "give --data pairs.jsonl or --synthetic N"},
		{"expert alone", func(s *SFTSettings) { s.Synthetic, s.Expert = 4, 0 }, "--expert and --no-mask need --synthetic-task experts"},
		{"no-mask alone", func(s *SFTSettings) { s.Synthetic, s.NoMask = 4, true }, "--expert and --no-mask need --synthetic-task experts"},
		{"experts without one", func(s *SFTSettings) { s.Synthetic, s.SynthConfig = 4, experts }, "give --expert, 0 to 1"},
		{"experts, one too many", func(s *SFTSettings) { s.Synthetic, s.SynthConfig, s.Expert = 4, experts, 2 }, "has experts 0 to 1"},
	} {
		s := DefaultSFTSettings()
		c.edit(&s)
		if _, err := s.Pairs(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	s := DefaultSFTSettings()
	s.Synthetic = 5
	if ps, err := s.Pairs(); err != nil || len(ps) != 5 {
		t.Errorf("--synthetic 5: %d pairs (%v), want 5", len(ps), err)
	}
}

// Claim locks an output that does not exist yet, so a second claim fails, and refuses one
// that exists; the lock leaves nothing beside the output once released.
func TestSFTClaim(t *testing.T) {
	parent := t.TempDir()
	s := SFT{Out: filepath.Join(parent, "sft")}
	lock, err := s.Claim()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(); err == nil || !strings.Contains(err.Error(), "in use by another umad process") {
		t.Errorf("second claim: %v, want it refused as in use", err)
	}
	lock.Release()
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("a released claim left %d entries", len(entries))
	}
	if err := os.Mkdir(s.Out, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(); err == nil || !strings.Contains(err.Error(), "exists; choose another --out") {
		t.Errorf("claim of an existing output: %v", err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Errorf("a refused claim left %d entries beside the output", len(entries))
	}
}
