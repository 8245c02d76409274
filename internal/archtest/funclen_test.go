package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// maxCLIFunc is the longest a function of cli/ may be, in lines from its func keyword to
// its closing brace: a command reads its flags into a configuration and makes one call,
// and its flag definitions are named groups.
const maxCLIFunc = 60

// longFuncs lists the functions of dir's non-test files over max lines, as "file:name (n)".
func longFuncs(t *testing.T, dir string, max int) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var long []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > max {
				long = append(long, fmt.Sprintf("%s:%s (%d)", filepath.Base(path), fn.Name.Name, n))
			}
		}
	}
	return long
}

// TestCLIFunctionLength keeps cli/ to flags -> configuration -> one call: no function
// over maxCLIFunc lines; the work belongs in the package the call goes to.
func TestCLIFunctionLength(t *testing.T) {
	for _, f := range longFuncs(t, filepath.Join(repoRoot(t), "cli"), maxCLIFunc) {
		t.Errorf("cli/%s lines: over %d; move the work into its package or split it", f, maxCLIFunc)
	}
}
