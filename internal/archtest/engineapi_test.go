package archtest

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The engine's exported API speaks its own types: no exported function, method, type, struct
// field, constant or variable of engine names a cgo/llama type in its signature, so its
// callers never need the binding (the engine converts to it at its door, as env.go does).
// Values are not type-checked: `var X = llama.Y` would pass; the signatures are what callers
// write against.
func TestEngineAPIHasNoBindingTypes(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(repoRoot(t), "engine", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no engine sources: %v", err)
	}
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		binding := bindingName(f)
		if binding == "" {
			continue
		}
		for _, what := range exportedMentions(f, binding) {
			t.Errorf("engine/%s: exported %s names a cgo/llama type: give the engine its own", filepath.Base(path), what)
		}
	}
}

// The generator seam is open: every method of engine's Queue is exported, so a generator
// (what debate.Generator's Serve consumes a queue with) may live outside engine, as the
// debate protocol's fake generator in debate/ does. A method a generator needs left
// unexported would close the seam again.
func TestEngineQueueIsOpen(t *testing.T) {
	path := filepath.Join(repoRoot(t), "engine", "queue.go")
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	methods := 0
	for _, decl := range f.Decls {
		if d, ok := decl.(*ast.FuncDecl); ok && d.Recv != nil && receiverName(d.Recv.List[0].Type) == "Queue" {
			methods++
			if !d.Name.IsExported() {
				t.Errorf("engine/queue.go: Queue.%s is unexported: a generator outside engine cannot call it", d.Name.Name)
			}
		}
	}
	if methods == 0 {
		t.Fatal("engine/queue.go declares no Queue methods: wrong file?")
	}
}

// bindingName is the name a file imports cgo/llama under, "" when it does not.
func bindingName(f *ast.File) string {
	for _, imp := range f.Imports {
		if p, _ := strconv.Unquote(imp.Path.Value); p == module+"cgo/llama" {
			if imp.Name != nil {
				return imp.Name.Name
			}
			return "llama"
		}
	}
	return ""
}

// exportedMentions names the exported declarations of f whose types mention pkg.
func exportedMentions(f *ast.File, pkg string) []string {
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Name.IsExported() && (d.Recv == nil || ast.IsExported(receiverName(d.Recv.List[0].Type))) && mentions(d.Type, pkg) {
				out = append(out, "func "+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if s.Name.IsExported() {
						out = append(out, typeMentions(s, pkg)...)
					}
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() && s.Type != nil && mentions(s.Type, pkg) {
							out = append(out, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// typeMentions checks an exported type: a struct by its exported and embedded fields, any
// other type whole.
func typeMentions(s *ast.TypeSpec, pkg string) []string {
	st, ok := s.Type.(*ast.StructType)
	if !ok {
		if mentions(s.Type, pkg) {
			return []string{"type " + s.Name.Name}
		}
		return nil
	}
	var out []string
	for _, fld := range st.Fields.List {
		name, exported := "(embedded)", len(fld.Names) == 0
		for _, n := range fld.Names {
			if n.IsExported() {
				name, exported = n.Name, true
			}
		}
		if exported && mentions(fld.Type, pkg) {
			out = append(out, "field "+s.Name.Name+"."+name)
		}
	}
	return out
}

// receiverName is the type name of a method's receiver (T, *T, T[P] or *T[P]).
func receiverName(e ast.Expr) string {
	for {
		switch x := e.(type) {
		case *ast.StarExpr:
			e = x.X
		case *ast.IndexExpr:
			e = x.X
		case *ast.IndexListExpr:
			e = x.X
		case *ast.Ident:
			return x.Name
		default:
			return ""
		}
	}
}

// mentions says whether n refers to anything of the package imported as pkg.
func mentions(n ast.Node, pkg string) bool {
	found := false
	ast.Inspect(n, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == pkg {
				found = true
			}
		}
		return !found
	})
	return found
}
