package archtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// listedPackage is the part of `go list -json` output the checker reads.
type listedPackage struct {
	ImportPath     string
	Dir            string
	Standard       bool
	DepOnly        bool
	GoFiles        []string
	CgoFiles       []string
	TestGoFiles    []string
	XTestGoFiles   []string
	IgnoredGoFiles []string
	InvalidGoFiles []string
	Deps           []string
	Module         *struct {
		Path string
		Main bool
	}
}

// files returns every Go file of p, test or not, including files that the
// current build configuration ignores: a kernel file for another GOOS is
// still kernel code.
func (p *listedPackage) files() []string {
	seen := make(map[string]bool)
	var out []string
	for _, list := range [][]string{p.GoFiles, p.CgoFiles, p.IgnoredGoFiles, p.InvalidGoFiles, p.TestGoFiles, p.XTestGoFiles} {
		for _, f := range list {
			if filepath.Ext(f) == ".go" && !seen[f] {
				seen[f] = true
				out = append(out, f)
			}
		}
	}
	return out
}

const listFields = "ImportPath,Dir,Standard,DepOnly,GoFiles,CgoFiles,TestGoFiles," +
	"XTestGoFiles,IgnoredGoFiles,InvalidGoFiles,Deps,Module"

// goList runs one `go list -e -deps -json ./...` in root: the module's
// packages and, marked DepOnly, everything they depend on. -e keeps a
// package that does not compile in the listing; the compiler reports it.
func goList(ctx context.Context, goCmd, root string) ([]listedPackage, error) {
	cmd := exec.CommandContext(ctx, goCmd, "list", "-e", "-deps", "-json="+listFields, "./...")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("archtest: %s list in %s: %w\n%s", goCmd, root, err, stderr.Bytes())
	}
	var pkgs []listedPackage
	dec := json.NewDecoder(&stdout)
	for {
		var p listedPackage
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return pkgs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("archtest: decoding go list output: %w", err)
		}
		pkgs = append(pkgs, p)
	}
}

// findGo returns the go command of the toolchain that built this test, or
// the one on PATH.
func findGo() (string, error) {
	for _, root := range []string{os.Getenv("GOROOT"), runtime.GOROOT()} {
		if root == "" {
			continue
		}
		p := filepath.Join(root, "bin", "go")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	p, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("archtest: no go command in GOROOT or PATH: %w", err)
	}
	return p, nil
}
