package archtest

// The checks of docs/ARCHITECTURE.md: its house lists exactly the module's packages and the
// repository's top-level directories, its layers are the import graph, and its command
// list is the CLI's. A change that moves a room fails here until the page follows it.

import (
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const docPath = "docs/ARCHITECTURE.md"

// repoRoot is the repository root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// docBlock returns the lines of the first fenced block after the line heading.
func docBlock(t *testing.T, heading string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), docPath))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	at := slices.Index(lines, heading)
	if at < 0 {
		t.Fatalf("%s has no line %q", docPath, heading)
	}
	var block []string
	in := false
	for _, l := range lines[at+1:] {
		switch {
		case strings.HasPrefix(l, "```") && in:
			return block
		case strings.HasPrefix(l, "```"):
			in = true
		case in:
			block = append(block, l)
		case strings.HasPrefix(l, "#"):
			t.Fatalf("%s: no code block under %q", docPath, heading)
		}
	}
	t.Fatalf("%s: no closed code block under %q", docPath, heading)
	return nil
}

// houseEntries are the paths the house names, the first word of each unindented line, and
// those of them it calls test helpers.
func houseEntries(t *testing.T) (entries, helpers []string) {
	for _, l := range docBlock(t, "### 1.1 Rooms") {
		if l == "" || l[0] == ' ' {
			continue
		}
		f := strings.Fields(l)
		entries = append(entries, f[0])
		if strings.HasPrefix(strings.Join(f[1:], " "), "test helper:") {
			helpers = append(helpers, pkgDir(f[0]))
		}
	}
	return entries, helpers
}

// pkgDir is a package directory as the page writes it: main.go stands for the root package.
func pkgDir(entry string) string {
	if entry == "main.go" {
		return "."
	}
	return strings.TrimSuffix(entry, "/")
}

// goPackages are the directories of `go list ./...`, relative to the root.
func goPackages(t *testing.T) []string {
	t.Helper()
	root := repoRoot(t)
	cmd := exec.Command("go", "list", "-e", "-f", "{{.Dir}}", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var dirs []string
	for _, d := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, filepath.ToSlash(rel))
	}
	return dirs
}

// goFiles are the Go files directly in dir.
func goFiles(t *testing.T, dir string) []string {
	m, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// testOnly says whether dir's Go files are all tests.
func testOnly(t *testing.T, dir string) bool {
	for _, f := range goFiles(t, dir) {
		if !strings.HasSuffix(f, "_test.go") {
			return false
		}
	}
	return true
}

// ignoredAtRoot lists the top-level names git ignores: .gitignore's and also a checkout's own
// .git/info/exclude (a developer's scratch folders), which only git itself knows.
func ignoredAtRoot(t *testing.T, root string) []string {
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range top {
		if d.Name() != ".git" {
			names = append(names, d.Name())
		}
	}
	cmd := exec.Command("git", append([]string{"check-ignore", "--"}, names...)...)
	cmd.Dir = root
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !(errors.As(err, &exit) && exit.ExitCode() == 1) { // 1: none ignored
		t.Fatalf("git check-ignore: %v", err)
	}
	return strings.Fields(string(out))
}

func TestDocHouse(t *testing.T) {
	root := repoRoot(t)
	entries, _ := houseEntries(t)
	var listed []string
	for _, e := range entries {
		path := filepath.Join(root, e)
		if _, err := os.Stat(path); err != nil {
			t.Errorf("the house lists %s, which does not exist", e)
			continue
		}
		if e == "main.go" || (strings.HasSuffix(e, "/") && len(goFiles(t, path)) > 0) {
			listed = append(listed, pkgDir(e))
		}
	}
	pkgs := goPackages(t)
	if len(pkgs) < 10 {
		t.Fatalf("go list found only %v: wrong root?", pkgs)
	}
	for _, p := range pkgs {
		if !slices.Contains(listed, p) {
			t.Errorf("package %s is missing from the house in %s", p, docPath)
		}
	}
	for _, p := range listed {
		if !slices.Contains(pkgs, p) {
			t.Errorf("the house lists %s, which go list does not know", p)
		}
	}
	ignored := ignoredAtRoot(t, root)
	top, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range top {
		if !d.IsDir() || d.Name() == ".git" || slices.Contains(ignored, d.Name()) {
			continue
		}
		// A directory is listed itself or through what it holds (cgo/llama/).
		if !slices.ContainsFunc(entries, func(e string) bool { return strings.HasPrefix(e, d.Name()+"/") }) {
			t.Errorf("directory %s/ is missing from the house in %s", d.Name(), docPath)
		}
	}
}

// TestDocLayers checks the layers: every package but the test helpers and test-only
// packages is on one line, and imports only packages on lower lines.
func TestDocLayers(t *testing.T) {
	root := repoRoot(t)
	_, helpers := houseEntries(t)
	row := map[string]int{}
	for i, l := range docBlock(t, "### 1.2 Layers") {
		for _, p := range strings.Fields(l) {
			row[pkgDir(p)] = i
		}
	}
	for _, p := range goPackages(t) {
		_, ok := row[p]
		switch out := slices.Contains(helpers, p) || testOnly(t, filepath.Join(root, p)); {
		case !ok && !out:
			t.Errorf("package %s is missing from the layers in %s", p, docPath)
		case ok && out:
			t.Errorf("the layers list %s, a test helper or test-only package", p)
		}
	}
	all := imports(t)
	for dir, deps := range all {
		r, ok := row[dir]
		if !ok {
			continue // left out, or not a package (reported above)
		}
		for _, dep := range deps {
			if d, ok := row[dep]; !ok {
				t.Errorf("%s imports %s, which the layers leave out", dir, dep)
			} else if d <= r {
				t.Errorf("%s imports %s, which is not on a lower line of the layers in %s", dir, dep, docPath)
			}
		}
	}
}

// cliCommands are the names of the commands cli/ registers: register(&ucli.Command{Name: ...}).
func cliCommands(t *testing.T) []string {
	root := repoRoot(t)
	files, err := filepath.Glob(filepath.Join(root, "cli", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) != 1 {
				return true
			}
			if fn, ok := call.Fun.(*ast.Ident); !ok || fn.Name != "register" {
				return true
			}
			if name := commandName(call.Args[0]); name != "" {
				names = append(names, name)
			} else {
				t.Errorf("%s: a register call whose command name is not a literal", path)
			}
			return true
		})
	}
	slices.Sort(names)
	return names
}

// commandName is the Name of &ucli.Command{Name: "..."}, or "".
func commandName(e ast.Expr) string {
	u, ok := e.(*ast.UnaryExpr)
	if !ok {
		return ""
	}
	lit, ok := u.X.(*ast.CompositeLit)
	if !ok {
		return ""
	}
	for _, el := range lit.Elts {
		kv, ok := el.(*ast.KeyValueExpr)
		if !ok {
			continue
		}
		if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Name" {
			if s, ok := kv.Value.(*ast.BasicLit); ok {
				name, _ := strconv.Unquote(s.Value)
				return name
			}
		}
	}
	return ""
}

func TestDocCommands(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(t), docPath))
	if err != nil {
		t.Fatal(err)
	}
	// The list runs from "Commands (`cli/`):" to the first period.
	m := regexp.MustCompile("(?s)\nCommands \\(`cli/`\\):([^.]*)\\.").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no line \"Commands (`cli/`): ...\"", docPath)
	}
	var doc []string
	for _, c := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllSubmatch(m[1], -1) {
		doc = append(doc, string(c[1]))
	}
	slices.Sort(doc)
	cli := cliCommands(t)
	if len(cli) == 0 {
		t.Fatal("found no commands in cli/")
	}
	if !slices.Equal(doc, cli) {
		t.Errorf("%s lists the commands %v; cli/ registers %v", docPath, doc, cli)
	}
}
