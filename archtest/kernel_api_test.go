package archtest

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
)

var update = flag.Bool("update", false, "rewrite testdata/kernel_api.golden from the kernel as it is now")

const kernelAPIGolden = "testdata/kernel_api.golden"

// TestKernelAPI pins the kernel's exported API and its event kinds: every
// exported type, function, method, struct field, interface method,
// constant and variable of every non-test file under kernel/, package-
// qualified, plus every run event kind. Work above the kernel (workers,
// handoff, orchestrator, scheduler) must not need the kernel to grow; a
// change here is a kernel change and is made deliberately:
//
//	go test ./archtest -run KernelAPI -update
func TestKernelAPI(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	got := kernelAPI(t, root)
	if *update {
		require.NoError(t, os.WriteFile(kernelAPIGolden, []byte(strings.Join(got, "\n")+"\n"), 0o644))
		t.Logf("wrote %s (%d entries)", kernelAPIGolden, len(got))
		return
	}
	b, err := os.ReadFile(kernelAPIGolden)
	require.NoError(t, err, "missing golden file; create it deliberately with: go test ./archtest -run KernelAPI -update")
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(want) // a hand-edited golden may be out of order
	added, removed := diff(want, got), diff(got, want)
	if len(added)+len(removed) > 0 {
		t.Errorf("the kernel's exported API or event kinds changed.\n"+
			"added:\n\t%s\nremoved:\n\t%s\n"+
			"If this change to the kernel is deliberate, update the golden file with:\n"+
			"\tgo test ./archtest -run KernelAPI -update\n"+
			"and review the diff of %s.",
			strings.Join(added, "\n\t"), strings.Join(removed, "\n\t"), kernelAPIGolden)
	}
}

// diff returns the entries of b that are not in a; both are sorted.
func diff(a, b []string) []string {
	var out []string
	for _, s := range b {
		if _, ok := slices.BinarySearch(a, s); !ok {
			out = append(out, s)
		}
	}
	return out
}

// kernelAPI lists the kernel's exported identifiers and event kinds, one
// sorted line each: "kernel/engine func New", "kernel/engine method
// Engine.Run", "kernel/engine field Config.Provider", "kernel/event kind
// run.started".
func kernelAPI(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		out = append(out, fileAPI(filepath.ToSlash(rel), f)...)
		return nil
	})
	require.NoError(t, err)
	for k := range event.Kinds() {
		out = append(out, "kernel/event kind "+k)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func fileAPI(pkg string, f *ast.File) []string {
	var out []string
	add := func(what, name string) { out = append(out, pkg+" "+what+" "+name) }
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				add("func", d.Name.Name)
				continue
			}
			if recv := typeName(d.Recv.List[0].Type); ast.IsExported(recv) {
				add("method", recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					add("type", s.Name.Name)
					for _, m := range members(s.Type) {
						add("field", s.Name.Name+"."+m)
					}
				case *ast.ValueSpec:
					what := "var"
					if d.Tok == token.CONST {
						what = "const"
					}
					for _, n := range s.Names {
						if n.IsExported() {
							add(what, n.Name)
						}
					}
				}
			}
		}
	}
	return out
}

// members returns the exported fields of a struct type and the exported
// methods of an interface type, embedded ones by their type's name.
func members(e ast.Expr) []string {
	var list *ast.FieldList
	switch t := e.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []string
	for _, f := range list.List {
		if len(f.Names) == 0 {
			if n := typeName(f.Type); ast.IsExported(n) {
				out = append(out, n)
			}
			continue
		}
		for _, n := range f.Names {
			if n.IsExported() {
				out = append(out, n.Name)
			}
		}
	}
	return out
}

// typeName returns the name of a receiver or embedded type: T for T, *T,
// T[P], pkg.T.
func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.StarExpr:
		return typeName(t.X)
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	case *ast.SelectorExpr:
		return t.Sel.Name
	}
	return ""
}
