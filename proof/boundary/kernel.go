package boundary

import (
	"bytes"
	"context"
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// KernelDeps returns every package outside the standard library that the
// kernel's packages (./kernel/...) of the module at root depend on,
// directly or not, sorted: `go list -deps`, without test files. For a pure
// kernel it holds only the kernel's own packages. goCmd is the go command.
func KernelDeps(ctx context.Context, goCmd, root string) ([]string, error) {
	cmd := exec.CommandContext(ctx, goCmd, "list", "-deps",
		"-f", "{{if not .Standard}}{{.ImportPath}}{{end}}", "./kernel/...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("boundary: go list -deps ./kernel/... in %s: %w\n%s", root, err, stderr.Bytes())
	}
	var out []string
	for line := range strings.Lines(stdout.String()) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// WordViolation is a forbidden word at a place of a kernel file.
type WordViolation struct {
	File string // slash-separated, relative to the module root
	Line int
	Finding
}

func (v WordViolation) String() string {
	return v.File + ":" + strconv.Itoa(v.Line) + ": " + v.Message()
}

// KernelWords checks every Go file under root/kernel (test files and files
// of other platforms included, testdata excluded) with forms, as archtest's
// kernel-words rule does, and returns what it found in file and line order.
func KernelWords(root string, forms Forms) ([]WordViolation, error) {
	var out []WordViolation
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
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments|parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		for _, x := range forms.File(f) {
			out = append(out, WordViolation{File: filepath.ToSlash(rel), Line: fset.Position(x.Pos).Line, Finding: x})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("boundary: reading the kernel: %w", err)
	}
	return out, nil
}

// Diff returns the lines of b that are not in a, in b's order: what b
// added to a.
func Diff(a, b []string) []string {
	in := make(map[string]bool, len(a))
	for _, s := range a {
		in[s] = true
	}
	var out []string
	for _, s := range b {
		if !in[s] {
			out = append(out, s)
		}
	}
	return out
}
