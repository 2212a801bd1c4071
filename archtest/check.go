package archtest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Config says which module to check and against which tables. Default fills
// it with the tables of this package.
type Config struct {
	Root   string // the module root directory (where go.mod is)
	Module string // the module path of go.mod
	Go     string // the go command; empty finds it in GOROOT or PATH

	Units          []Unit
	KernelStd      []string
	TestLibraries  []string
	ForbiddenWords []string
	Exceptions     []Exception
}

// Check lists the module's packages with one `go list -deps` call, parses
// their files and returns every violation that no exception excuses, sorted
// by file and line. An error means the check could not run.
func Check(ctx context.Context, cfg Config) ([]Violation, error) {
	c, err := newChecker(cfg)
	if err != nil {
		return nil, err
	}
	goCmd := cfg.Go
	if goCmd == "" {
		if goCmd, err = findGo(); err != nil {
			return nil, err
		}
	}
	pkgs, err := goList(ctx, goCmd, cfg.Root)
	if err != nil {
		return nil, err
	}
	found := false
	for _, p := range pkgs {
		c.std[p.ImportPath] = p.Standard
		if p.Module != nil && p.Module.Main {
			if p.Module.Path != cfg.Module {
				return nil, fmt.Errorf("archtest: %s holds module %s, not %s", cfg.Root, p.Module.Path, cfg.Module)
			}
			found = true
		}
	}
	if !found {
		// A wrong root or module path must not pass by checking nothing.
		return nil, fmt.Errorf("archtest: no package of module %s in %s", cfg.Module, cfg.Root)
	}
	for i := range pkgs {
		if p := &pkgs[i]; !p.DepOnly && c.inModule(p.ImportPath) {
			if err := c.checkPackage(p); err != nil {
				return nil, err
			}
		}
	}
	out := c.applyExceptions(cfg.Exceptions)
	slices.SortFunc(out, compareViolations)
	return slices.Compact(out), nil
}

type checker struct {
	module    string
	units     []*Unit // longest Dir first, so the first match is the closest
	mayImport map[string]map[string]bool
	kernelStd map[string]bool
	testLibs  []string
	forms     map[string]string // a form of a forbidden word -> the word
	std       map[string]bool   // every listed package -> whether it is standard library
	fset      *token.FileSet
	out       []Violation
}

func newChecker(cfg Config) (*checker, error) {
	if cfg.Root == "" || cfg.Module == "" {
		return nil, errors.New("archtest: Config.Root and Config.Module are required")
	}
	c := &checker{
		module:    cfg.Module,
		mayImport: make(map[string]map[string]bool),
		kernelStd: make(map[string]bool),
		testLibs:  slices.Clone(cfg.TestLibraries),
		forms:     wordForms(cfg.ForbiddenWords),
		std:       make(map[string]bool),
		fset:      token.NewFileSet(),
	}
	kernels := 0
	for i := range cfg.Units {
		u := cfg.Units[i] // a copy: the caller's table stays the caller's
		if u.Dir == "" || c.mayImport[u.Dir] != nil {
			return nil, fmt.Errorf("archtest: unit folder %q is empty or listed twice", u.Dir)
		}
		c.mayImport[u.Dir] = make(map[string]bool)
		for _, d := range u.MayImport {
			c.mayImport[u.Dir][d] = true
		}
		if u.Kernel {
			kernels++
		}
		c.units = append(c.units, &u)
	}
	if kernels != 1 {
		return nil, fmt.Errorf("archtest: the table needs exactly one kernel unit, has %d", kernels)
	}
	for _, u := range c.units {
		for _, d := range u.MayImport {
			if c.mayImport[d] == nil {
				return nil, fmt.Errorf("archtest: unit %q may import %q, which is not in the table", u.Dir, d)
			}
		}
	}
	slices.SortFunc(c.units, func(a, b *Unit) int { return cmp.Compare(len(b.Dir), len(a.Dir)) })
	for _, p := range cfg.KernelStd {
		c.kernelStd[p] = true
	}
	for _, e := range cfg.Exceptions {
		if e.Rule == "" || e.File == "" || e.Subject == "" || e.Reason == "" {
			return nil, fmt.Errorf("archtest: exception %+v needs a rule, a file, a subject and a reason", e)
		}
	}
	return c, nil
}

func (c *checker) inModule(path string) bool {
	return path == c.module || strings.HasPrefix(path, c.module+"/")
}

// rel returns a module package's folder relative to the module root.
func (c *checker) rel(path string) string {
	if path == c.module {
		return "."
	}
	return strings.TrimPrefix(path, c.module+"/")
}

// unitOf returns the unit that holds the folder rel, or nil.
func (c *checker) unitOf(rel string) *Unit {
	for _, u := range c.units {
		if rel == u.Dir || strings.HasPrefix(rel, u.Dir+"/") {
			return u
		}
	}
	return nil
}

// isStd reports whether path is a standard-library package. go list marks
// every package in the dependency graph; an import only a test file makes
// falls back to the toolchain's rule: no dot in the first path element.
func (c *checker) isStd(path string) bool {
	if std, listed := c.std[path]; listed {
		return std
	}
	first, _, _ := strings.Cut(path, "/")
	return !strings.Contains(first, ".") && !c.inModule(path)
}

func (c *checker) isTestLib(path string) bool {
	for _, lib := range c.testLibs {
		if path == lib || strings.HasPrefix(path, lib+"/") {
			return true
		}
	}
	return false
}

func (c *checker) report(v Violation) { c.out = append(c.out, v) }

func (c *checker) checkPackage(p *listedPackage) error {
	rel := c.rel(p.ImportPath)
	u := c.unitOf(rel)
	if u == nil {
		c.report(Violation{
			Rule: RuleLayerUnknown, File: rel, Subject: rel,
			Message: fmt.Sprintf("package %s is in a folder that is not in the layer table; "+
				"a new folder enters the table (archtest.Layers and docs/architecture.md) before it gets code", p.ImportPath),
		})
		return nil
	}
	if u.Unconstrained {
		return nil
	}
	if u.Kernel {
		c.checkKernelDeps(p, rel)
	}
	mode := parser.ImportsOnly
	if u.Kernel {
		mode = parser.ParseComments | parser.SkipObjectResolution
	}
	code := make(map[string]*ast.File) // a kernel package's non-test files
	for _, name := range p.files() {
		file := name
		if rel != "." {
			file = rel + "/" + name
		}
		f, err := parser.ParseFile(c.fset, filepath.Join(p.Dir, name), nil, mode)
		if err != nil {
			return fmt.Errorf("archtest: %w", err)
		}
		test := strings.HasSuffix(name, "_test.go")
		for _, spec := range f.Imports {
			path, err := strconv.Unquote(spec.Path.Value)
			if err != nil {
				return fmt.Errorf("archtest: %s: import %s: %w", file, spec.Path.Value, err)
			}
			rule, msg := RuleLayerImports, ""
			if u.Kernel {
				rule, msg = RuleKernelImports, c.kernelImport(path, test)
			} else {
				msg = c.layerImport(u, rel, path, test)
			}
			if msg != "" {
				c.report(Violation{Rule: rule, File: file, Line: c.lineOf(spec.Pos()), Subject: path, Message: msg})
			}
		}
		if u.Kernel {
			c.checkWords(file, f)
			if !test {
				code[file] = f
			}
		}
	}
	if u.Kernel {
		c.checkGlobals(code)
	}
	return nil
}

func (c *checker) applyExceptions(exceptions []Exception) []Violation {
	used := make([]bool, len(exceptions))
	kept := c.out[:0]
	for _, v := range c.out {
		i := slices.IndexFunc(exceptions, func(e Exception) bool {
			return e.Rule == v.Rule && e.File == v.File && e.Subject == v.Subject
		})
		if i < 0 {
			kept = append(kept, v)
			continue
		}
		used[i] = true
	}
	for i, e := range exceptions {
		if !used[i] {
			kept = append(kept, Violation{
				Rule: RuleExceptionUnused, File: e.File, Subject: e.Subject,
				Message: fmt.Sprintf("the exception to rule %s about %q excuses nothing; delete it from archtest.Exceptions", e.Rule, e.Subject),
			})
		}
	}
	return kept
}

// lineOf returns the 1-based line of pos.
func (c *checker) lineOf(pos token.Pos) int { return c.fset.Position(pos).Line }
