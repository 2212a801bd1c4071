package boundary

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/event"
)

// KernelAPI lists the exported identifiers and event kinds of the kernel
// of the module at root, one sorted line each: "kernel/engine func New",
// "kernel/engine method Engine.Run", "kernel/engine field
// Config.Provider", "kernel/event kind run.started". archtest's
// TestKernelAPI pins it with its golden file, and the boundary proof
// (proof/acceptance) checks the golden file itself. The event kinds are
// those of the kernel/event package this binary was built with.
func KernelAPI(root string) ([]string, error) {
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
	if err != nil {
		return nil, fmt.Errorf("boundary: listing the kernel API: %w", err)
	}
	for k := range event.Kinds() {
		out = append(out, "kernel/event kind "+k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
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
