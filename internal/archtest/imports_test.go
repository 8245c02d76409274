// Package archtest checks the import rules of docs/ARCHITECTURE.md section 1 on the source
// tree, so a shortcut through the layers fails a test instead of slowly undoing the layout,
// and that the page's lists of packages, layers and commands are true (doc_test.go).
package archtest

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/umad-dev/umad/"

// imports maps each package directory (relative to the repository root) to the module
// packages its non-test files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root := repoRoot(t)
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[dir], rest) {
				out[dir] = append(out[dir], rest)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestImportRules(t *testing.T) {
	all := imports(t)
	if len(all["trainer"]) == 0 || len(all["engine"]) == 0 {
		t.Fatalf("found no imports of trainer or engine: wrong root? %v", all)
	}
	for dir, deps := range all {
		for _, dep := range deps {
			var why string
			switch {
			case dep == "cgo/llama" && dir != "engine" && dir != "bench":
				why = "only engine and bench reach llama.cpp"
			case (dir == "engine" || dir == "debate") && (dep == "uncertainty" || dep == "trainer" || dep == "cli"):
				why = dir + " sits below trainer and the CLI and beside uncertainty"
			case dir == "engine" && dep == "debate":
				why = "engine generates for any caller; the debate protocol sits above it"
			case strings.HasPrefix(dir, "cgo/") && dep != "internal/sysmem" && dep != "trainspec":
				why = "cgo is the bottom layer; it shares only internal/sysmem's memory facts and trainspec's run settings"
			case dir == "internal/sysmem":
				why = "internal/sysmem is a leaf that cgo imports"
			case dir == "trainspec":
				why = "trainspec is a leaf: the run settings that cgo/torch converts at its door"
			case dir == "arch":
				why = "the architecture registry is a leaf that every layer reads"
			case slices.Contains([]string{"sampler", "grade", "uncertainty", "model", "tokenizer", "safetensors", "peft", "gguf", "arch", "trainspec", "data", "chat", "trainlog", "rollouts", "memplan", "recipe", "experiment", "scorefile"}, dir) &&
				(strings.HasPrefix(dep, "cgo/") || dep == "engine" || dep == "debate" || dep == "trainer" || dep == "cli"):
				why = dir + " is pure Go below the engine"
			}
			if why != "" {
				t.Errorf("%s imports %s: %s", dir, dep, why)
			}
		}
	}
}
