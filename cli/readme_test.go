package cli

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/umad-dev/umad/internal/sharedtest"
	"github.com/umad-dev/umad/internal/testmodel"
	"github.com/umad-dev/umad/internal/torchtest"
)

// oneStep shrinks a README command to one step on a tiny model: the flags are appended,
// and a repeated flag's last value wins, so every other value stays as the README has it.
func oneStep(cmd []string) ([]string, bool) {
	switch cmd[0] {
	case "train":
		val := []string{"--val-synthetic", "2"}
		if slices.Contains(cmd, "--val-data") {
			val = []string{"--val-limit", "2"}
		}
		return append([]string{"--steps", "1", "--batch", "2", "-g", "2", "--mini-batch", "2", "--max-tokens", "12",
			"--prompt-limit", "512", "--slots", "4", "--threads", "1", "--torch-threads", "1"}, val...), true
	case "debate":
		return []string{"--limit", "2", "--seeds", "1", "--max-tokens", "12", "--prompt-limit", "512", "--slots", "8", "--threads", "1"}, true
	case "convert":
		return nil, true
	}
	return nil, false
}

// readmeCommands returns the `./umad` command lines of README.md between
// <!-- NAME:begin --> and <!-- NAME:end -->, with backslash continuations joined and each
// line split into words as the shell would (single quotes only; no variables).
func readmeCommands(t *testing.T, name string) [][]string {
	t.Helper()
	text, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(text), "<!-- "+name+":begin -->")
	section, _, ok2 := strings.Cut(rest, "<!-- "+name+":end -->")
	if !ok || !ok2 {
		t.Fatalf("README.md has no %s section", name)
	}
	var cmds [][]string
	for _, line := range strings.Split(strings.ReplaceAll(section, "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "./umad ") {
			continue
		}
		words, err := shellWords(line)
		if err != nil {
			t.Fatalf("README command %q: %v", line, err)
		}
		cmds = append(cmds, words[1:])
	}
	return cmds
}

// shellWords splits a command line at blanks, keeping single-quoted text whole.
func shellWords(line string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	for _, r := range line {
		switch {
		case r == '\'':
			quoted, inWord = !quoted, true
		case (r == ' ' || r == '\t') && !quoted:
			if inWord {
				words = append(words, w.String())
				w.Reset()
			}
			inWord = false
		case strings.ContainsRune(`"$;|&<>`+"`", r) && !quoted:
			return nil, errShell(r)
		default:
			w.WriteRune(r)
			inWord = true
		}
	}
	if quoted {
		return nil, errShell('\'')
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}

type errShell rune

func (e errShell) Error() string {
	return "uses " + string(rune(e)) + ", which the README test does not interpret; write the command without it"
}

// paperWorkdir makes a working directory as the paper's commands expect it, with tiny
// models standing in for the paper's HF directories, more links (name -> target) beside
// them, and ../shared and ../build, and changes into it.
func paperWorkdir(t *testing.T, more map[string]string) {
	t.Helper()
	build, err := filepath.Abs(filepath.Join("..", "build"))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	work := filepath.Join(root, "work")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	links := map[string]string{
		filepath.Join(root, "shared"):                 filepath.Dir(sharedtest.Path(t, "data")),
		filepath.Join(root, "build"):                  build, // the plugin, found as in a checkout
		filepath.Join(work, "Qwen2.5-3B-Instruct"):    filepath.Join(testmodel.Tiny(t, "qwen2"), "hf"),
		filepath.Join(work, "Qwen3-4B-Instruct-2507"): filepath.Join(testmodel.Tiny(t, "qwen3"), "hf"),
	}
	for name, target := range more {
		links[filepath.Join(work, name)] = target
	}
	for link, target := range links {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(work)
}

// Every command of the README's section on the paper's tables runs as written, in
// order, for one step on tiny models standing in for the paper's: a command that names a
// flag, value or file that does not exist fails here, not in a user's first hour.
func TestReadmePaperCommands(t *testing.T) {
	cmds := readmeCommands(t, "paper-commands")
	if len(cmds) < 10 {
		t.Fatalf("the paper section has %d commands; want every row of Tables 1 and 2", len(cmds))
	}
	torchtest.Open(t) // the plugin is there (or the test skips, or fails in CI)
	paperWorkdir(t, nil)
	for _, c := range cmds {
		shrink, ok := oneStep(c)
		if !ok {
			t.Fatalf("README command %q: the test has no one-step form of umad %s", strings.Join(c, " "), c[0])
		}
		args := append(append([]string(nil), c...), shrink...)
		if _, stderr, err := runApp(t, args...); err != nil {
			t.Fatalf("README command\n  ./umad %s\nfailed: %v\n%s", strings.Join(c, " "), err, stderr)
		}
	}
}
