package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// umadOnPath puts an executable named umad on PATH that runs this test binary as umad
// (mainArgsEnv), so completion scripts call the umad under test.
func umadOnPath(t *testing.T) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	wrapper := "#!/bin/sh\n" + mainArgsEnv + "=\"$(printf '%s\\n' \"$@\")\" exec '" + self + "'\n"
	if err := os.WriteFile(filepath.Join(dir, "umad"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// completionScript writes `umad completion SHELL` to a file.
func completionScript(t *testing.T, shell string) string {
	t.Helper()
	out, stderr, err := runApp(t, "completion", shell)
	if err != nil {
		t.Fatalf("completion %s: %v\n%s", shell, err, stderr)
	}
	p := filepath.Join(t.TempDir(), "umad."+shell)
	if err := os.WriteFile(p, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// shellLines runs a shell command and returns its output's lines.
func shellLines(t *testing.T, shell string, args ...string) []string {
	t.Helper()
	if _, err := exec.LookPath(shell); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not installed; CI tests its completion", shell)
		}
		t.Skipf("%s is not installed", shell)
	}
	out, err := exec.Command(shell, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", shell, err, out)
	}
	return strings.Fields(string(out))
}

// Bash completes `umad tr` to train and `umad train --lr` to the flags that start so,
// through the script `umad completion bash` prints and the real umad it calls; the word
// after a flag is left to bash's file names.
func TestCompletionBash(t *testing.T) {
	umadOnPath(t)
	script := completionScript(t, "bash")
	complete := func(line string) []string {
		// COMP_WORDS as bash's readline would split the line; the last word is completed.
		return shellLines(t, "bash", "-c", `source "$1"; read -ra COMP_WORDS <<<"$2"; [[ $2 == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]}-1)); _umad_complete; printf '%s\n' "${COMPREPLY[@]}"`, "bash", script, line)
	}
	if got := complete("umad tr"); !slices.Equal(got, []string{"train"}) {
		t.Errorf("umad tr completes to %q, want [train]", got)
	}
	if got := complete("umad train --lr"); !slices.Equal(got, []string{"--lr-schedule"}) {
		t.Errorf("umad train --lr completes to %q, want [--lr-schedule]", got)
	}
	if got := complete("umad train --val-t"); !slices.Equal(got, []string{"--val-temperature", "--val-turns"}) {
		t.Errorf("umad train --val-t completes to %q", got)
	}
	if got := complete("umad convert hf"); !slices.Equal(got, []string{"hf2gguf"}) {
		t.Errorf("umad convert hf completes to %q, want [hf2gguf]", got)
	}
	if got := complete("umad train --agent "); len(got) != 0 {
		t.Errorf("a flag's value completes to %q, want nothing (bash's file names)", got)
	}
}

// Fish completes through the script urfave/cli generates.
func TestCompletionFish(t *testing.T) {
	umadOnPath(t)
	script := completionScript(t, "fish")
	got := shellLines(t, "fish", "-c", `source $argv[1]; complete -C "umad tr"; complete -C "umad train --val-t"`, script)
	for _, want := range []string{"train", "--val-temperature", "--val-turns"} {
		if !slices.Contains(got, want) {
			t.Errorf("fish completions %q lack %s", got, want)
		}
	}
}

// Zsh's script asks umad for the words so far; compadd and _files are zsh's completion
// system, outside a completion widget replaced by functions that print what they get.
func TestCompletionZsh(t *testing.T) {
	umadOnPath(t)
	script := completionScript(t, "zsh")
	complete := func(words ...string) []string {
		return shellLines(t, "zsh", append([]string{"-c", `source $1; shift
compadd() { [[ $1 == -a ]] && print -l -- ${(P)2} }; _files() { print FILES }
words=("$@"); CURRENT=$#; _umad`, "zsh", script}, words...)...)
	}
	if got := complete("umad", "tr"); !slices.Contains(got, "train") || !slices.Contains(got, "debate") {
		t.Errorf("umad tr: candidates %q, want every command (compadd filters by prefix)", got)
	}
	if got := complete("umad", "train", "--lr"); !slices.Equal(got, []string{"--lr-schedule"}) {
		t.Errorf("umad train --lr: %q", got)
	}
	if got := complete("umad", "train", "--agent", ""); !slices.Equal(got, []string{"FILES"}) {
		t.Errorf("a flag's value: %q, want file names", got)
	}
}

// An unknown shell is one line naming the choices.
func TestCompletionUnknownShell(t *testing.T) {
	if _, _, err := runApp(t, "completion", "tcsh"); err == nil || !strings.Contains(err.Error(), "bash, zsh or fish") {
		t.Errorf("completion tcsh: %v", err)
	}
}
