package boundary

import (
	"bufio"
	"errors"
	"fmt"
	"go/ast"
	"go/build"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/event"
)

// KernelAPI lists the exported API and event kinds of the kernel of the
// module at root, one sorted line each, with what a caller depends on:
// signatures, field types, underlying types and constant values, types
// written with their package's name.
//
//	kernel/bound func Missing(field string) error
//	kernel/bound const MaxMessageBytes untyped int = 65536
//	kernel/engine field Config.Provider model.Provider
//	kernel/engine method (*Engine).Start(ctx context.Context, def Definition, input Input) (*Run, error)
//	kernel/engine type Status int
//	kernel/event kind run.started
//
// The kernel's packages are type-checked from their source (files of
// other platforms left out), the standard library from GOROOT's. archtest's
// TestKernelAPI pins the listing with its golden file, and the boundary
// proof (proof/acceptance) checks the golden file itself. The event kinds
// are those of the kernel/event package this binary was built with.
func KernelAPI(root string) ([]string, error) {
	out, err := kernelAPI(root)
	if err != nil {
		return nil, fmt.Errorf("boundary: listing the kernel API: %w", err)
	}
	for k := range event.Kinds() {
		out = append(out, "kernel/event kind "+k)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// checker type-checks the module's packages from source, each once.
type checker struct {
	root, module string
	fset         *token.FileSet
	std          types.Importer
	done         map[string]*types.Package
	busy         map[string]bool
}

func (c *checker) Import(p string) (*types.Package, error) {
	// The module's own packages from source: the kernel's, and any other
	// a broken kernel imports (the dependency check reports those).
	if p != c.module && !strings.HasPrefix(p, c.module+"/") {
		return c.std.Import(p)
	}
	if pkg, ok := c.done[p]; ok {
		return pkg, nil
	}
	if c.busy[p] {
		return nil, fmt.Errorf("import cycle through %s", p)
	}
	c.busy[p] = true
	defer delete(c.busy, p)
	dir := filepath.Join(c.root, filepath.FromSlash(strings.TrimPrefix(p, c.module+"/")))
	files, err := c.parse(dir)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: c}
	pkg, err := conf.Check(p, c.fset, files, nil)
	if err != nil {
		return nil, err
	}
	c.done[p] = pkg
	return pkg, nil
}

// parse reads the non-test Go files of dir that build on this platform.
func (c *checker) parse(dir string) ([]*ast.File, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		if ok, err := build.Default.MatchFile(dir, n); err != nil || !ok {
			if err != nil {
				return nil, err
			}
			continue
		}
		f, err := parser.ParseFile(c.fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

// modulePath reads the module line of root/go.mod.
func modulePath(root string) (string, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(s.Text()), "module "); ok {
			return strings.TrimSpace(rest), nil
		}
	}
	if err := s.Err(); err != nil {
		return "", err
	}
	return "", errors.New(root + "/go.mod has no module line")
}

func kernelAPI(root string) ([]string, error) {
	module, err := modulePath(root)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	c := &checker{root: root, module: module, fset: fset, std: importer.ForCompiler(fset, "source", nil),
		done: make(map[string]*types.Package), busy: make(map[string]bool)}
	var dirs []string
	err = filepath.WalkDir(filepath.Join(root, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
			dirs = append(dirs, filepath.Dir(p))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(dirs)
	var out []string
	for _, dir := range slices.Compact(dirs) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		pkg, err := c.Import(path.Join(module, rel))
		if err != nil {
			return nil, err
		}
		if pkg.Name() == "main" {
			continue
		}
		out = append(out, packageAPI(rel, pkg)...)
	}
	return out, nil
}

// packageAPI lists the exported objects of pkg.
func packageAPI(rel string, pkg *types.Package) []string {
	qual := func(p *types.Package) string {
		if p == pkg {
			return ""
		}
		return p.Name()
	}
	typ := func(t types.Type) string { return types.TypeString(t, qual) }
	sig := func(s *types.Signature) string { return strings.TrimPrefix(typ(s), "func") }
	var out []string
	add := func(format string, args ...any) { out = append(out, rel+" "+fmt.Sprintf(format, args...)) }
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		switch o := obj.(type) {
		case *types.Func:
			add("func %s%s", name, sig(o.Type().(*types.Signature)))
		case *types.Const:
			add("const %s %s = %s", name, typ(o.Type()), o.Val().ExactString())
		case *types.Var:
			add("var %s %s", name, typ(o.Type()))
		case *types.TypeName:
			out = append(out, typeAPI(rel, o, typ, sig)...)
		}
	}
	return out
}

// typeAPI lists an exported type: its definition, its exported fields or
// interface methods, and its exported methods.
func typeAPI(rel string, o *types.TypeName, typ func(types.Type) string, sig func(*types.Signature) string) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, rel+" "+fmt.Sprintf(format, args...)) }
	name := o.Name()
	if o.IsAlias() {
		add("type %s = %s", name, typ(types.Unalias(o.Type())))
		return out
	}
	named, ok := o.Type().(*types.Named)
	if !ok {
		add("type %s %s", name, typ(o.Type()))
		return out
	}
	params := ""
	if tp := named.TypeParams(); tp.Len() > 0 {
		var ps []string
		for i := range tp.Len() {
			p := tp.At(i)
			ps = append(ps, p.Obj().Name()+" "+typ(p.Constraint()))
		}
		params = "[" + strings.Join(ps, ", ") + "]"
	}
	switch u := named.Underlying().(type) {
	case *types.Struct:
		add("type %s%s struct", name, params)
		for i := range u.NumFields() {
			f := u.Field(i)
			if !f.Exported() {
				continue
			}
			if f.Embedded() {
				add("field %s.%s embedded %s", name, f.Name(), typ(f.Type()))
				continue
			}
			add("field %s.%s %s", name, f.Name(), typ(f.Type()))
		}
	case *types.Interface:
		add("type %s%s interface", name, params)
		for i := range u.NumEmbeddeds() {
			add("field %s embeds %s", name, typ(u.EmbeddedType(i)))
		}
		for i := range u.NumExplicitMethods() {
			m := u.ExplicitMethod(i)
			if m.Exported() {
				add("method %s.%s%s", name, m.Name(), sig(m.Type().(*types.Signature)))
			}
		}
	default:
		add("type %s%s %s", name, params, typ(u))
	}
	for i := range named.NumMethods() {
		m := named.Method(i)
		if !m.Exported() {
			continue
		}
		s := m.Type().(*types.Signature)
		recv := name
		if _, ptr := s.Recv().Type().(*types.Pointer); ptr {
			recv = "(*" + name + ")"
		}
		add("method %s.%s%s", recv, m.Name(), sig(s))
	}
	return out
}
