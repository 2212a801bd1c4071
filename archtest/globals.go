package archtest

import (
	"fmt"
	"go/ast"
	"go/token"
	"strconv"
)

// checkGlobals applies rule kernel-globals to the non-test files of one
// kernel package: two engines in one process must share nothing, so a
// package-level variable may only hold a value fixed at initialisation (an
// error, a problem, a lookup table). It reports a package-level variable
// whose type or initial value names package sync or sync/atomic (a lock, a
// once, an atomic cell: state by construction), and an assignment or
// increment, inside any function, whose target is a package-level variable
// of the package that the function does not declare itself.
func (c *checker) checkGlobals(files map[string]*ast.File) {
	globals := make(map[string]bool)
	for file, f := range files {
		syncNames := syncImports(f)
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.VAR {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				mentions := namesSync(vs.Type, syncNames)
				for _, v := range vs.Values {
					mentions = mentions || namesSync(v, syncNames)
				}
				for _, n := range vs.Names {
					if n.Name == "_" {
						continue
					}
					globals[n.Name] = true
					if mentions {
						c.report(Violation{Rule: RuleKernelGlobals, File: file, Line: c.lineOf(n.Pos()), Subject: n.Name,
							Message: fmt.Sprintf("package-level variable %s holds a sync or sync/atomic value: "+
								"the kernel has no global state; keep it in a value its caller owns", n.Name)})
					}
				}
			}
		}
	}
	for file, f := range files {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			local := declaredIn(fn)
			report := func(target ast.Expr) {
				id := rootIdent(target)
				if id == nil || !globals[id.Name] || local[id.Name] {
					return
				}
				c.report(Violation{Rule: RuleKernelGlobals, File: file, Line: c.lineOf(id.Pos()), Subject: id.Name,
					Message: fmt.Sprintf("function %s writes package-level variable %s: "+
						"the kernel has no global state; keep it in a value its caller owns", fn.Name.Name, id.Name)})
			}
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				switch s := n.(type) {
				case *ast.AssignStmt:
					if s.Tok != token.DEFINE {
						for _, lhs := range s.Lhs {
							report(lhs)
						}
					}
				case *ast.IncDecStmt:
					report(s.X)
				}
				return true
			})
		}
	}
}

// syncImports returns the names file f uses for sync and sync/atomic.
func syncImports(f *ast.File) map[string]bool {
	names := make(map[string]bool)
	for _, spec := range f.Imports {
		path, err := strconv.Unquote(spec.Path.Value)
		if err != nil || (path != "sync" && path != "sync/atomic") {
			continue
		}
		name := "sync"
		if path == "sync/atomic" {
			name = "atomic"
		}
		if spec.Name != nil {
			name = spec.Name.Name
		}
		names[name] = true
	}
	return names
}

// namesSync reports whether e refers to a member of an imported sync or
// sync/atomic package.
func namesSync(e ast.Node, syncNames map[string]bool) bool {
	if e == nil || len(syncNames) == 0 {
		return false
	}
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if sel, ok := n.(*ast.SelectorExpr); ok {
			if x, ok := sel.X.(*ast.Ident); ok && syncNames[x.Name] {
				found = true
			}
		}
		return !found
	})
	return found
}

// rootIdent returns the variable an assignment target writes into: x for
// x, x.f, x[i], (*x).f and the like; nil when the target is not rooted in
// a name (a call's result, say).
func rootIdent(e ast.Expr) *ast.Ident {
	for {
		switch t := e.(type) {
		case *ast.Ident:
			return t
		case *ast.SelectorExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.StarExpr:
			e = t.X
		case *ast.ParenExpr:
			e = t.X
		default:
			return nil
		}
	}
}

// declaredIn returns every name fn declares: its receiver, parameters and
// results, and anything declared anywhere in its body. A name declared
// anywhere in the function shadows the package-level one for this rule,
// which may miss a write before the shadowing declaration but never
// reports a local variable.
func declaredIn(fn *ast.FuncDecl) map[string]bool {
	names := make(map[string]bool)
	fields := func(l *ast.FieldList) {
		if l == nil {
			return
		}
		for _, f := range l.List {
			for _, n := range f.Names {
				names[n.Name] = true
			}
		}
	}
	fields(fn.Recv)
	fields(fn.Type.Params)
	fields(fn.Type.Results)
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch s := n.(type) {
		case *ast.AssignStmt:
			if s.Tok == token.DEFINE {
				for _, lhs := range s.Lhs {
					if id, ok := lhs.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		case *ast.RangeStmt:
			if s.Tok == token.DEFINE {
				for _, e := range []ast.Expr{s.Key, s.Value} {
					if id, ok := e.(*ast.Ident); ok {
						names[id.Name] = true
					}
				}
			}
		case *ast.ValueSpec:
			for _, id := range s.Names {
				names[id.Name] = true
			}
		case *ast.FuncType:
			fields(s.Params)
			fields(s.Results)
		}
		return true
	})
	return names
}
