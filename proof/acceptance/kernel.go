package acceptance

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed" // the baselines
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/spice-orch/spice-orch/proof/boundary"
)

// The kernel as it was when the boundary was proven: archtest's golden
// file of the kernel API, and the kernel's dependency set.
//
//go:embed testdata/kernel_api.baseline
var baselineAPI string

//go:embed testdata/kernel_deps.baseline
var baselineDeps string

// GoldenPath is archtest's kernel API golden file, relative to the module
// root.
const GoldenPath = "archtest/testdata/kernel_api.golden"

// ProofWords are the words no kernel identifier, string or declaration
// comment may use: archtest's (DESIGN.md's list) and "plugin", which the
// runtime tools are built from and the kernel must not know either.
func ProofWords() []string { return append(boundary.ForbiddenWords(), "plugin") }

// KernelReport is what the no-kernel-change checks measured.
type KernelReport struct {
	APIEntries int
	GoldenSHA  string   // SHA-256 of archtest's golden file
	Deps       []string // non-standard-library packages the kernel depends on
	Words      []string // the words checked
	Violations int
}

func lines(s string) []string {
	var out []string
	for l := range strings.Lines(s) {
		if l = strings.TrimRight(l, "\r\n"); l != "" {
			out = append(out, l)
		}
	}
	return out
}

func diffText(want, got []string) string {
	added, removed := boundary.Diff(want, got), boundary.Diff(got, want)
	return "added:\n\t" + strings.Join(added, "\n\t") + "\nremoved:\n\t" + strings.Join(removed, "\n\t")
}

// CheckKernelAPI: archtest's golden file is the baseline's, and the
// kernel's exported API is the golden file's. A deliberate kernel change
// updates the golden file; the proof then fails until it is proven again
// (renew the baselines deliberately with `go test ./proof/acceptance -run
// TestBoundaryProof -args -baseline`, then `make proof`).
func CheckKernelAPI(root, baseline string, r *KernelReport) error {
	raw, err := os.ReadFile(filepath.Join(root, GoldenPath))
	if err != nil {
		return fail(PartKernel, "reading archtest's golden file: %v", err)
	}
	sum := sha256.Sum256(raw)
	r.GoldenSHA = hex.EncodeToString(sum[:])
	golden := lines(string(raw))
	want := lines(baseline)
	if d := boundary.Diff(want, golden); len(d) > 0 || len(boundary.Diff(golden, want)) > 0 {
		return fail(PartKernel, "archtest's kernel API golden file (%s) changed since the boundary was proven:\n%s", GoldenPath, diffText(want, golden))
	}
	api, err := boundary.KernelAPI(root)
	if err != nil {
		return wrap(PartKernel, err)
	}
	r.APIEntries = len(api)
	if len(boundary.Diff(golden, api)) > 0 || len(boundary.Diff(api, golden)) > 0 {
		return fail(PartKernel, "the kernel's exported API is not archtest's golden file:\n%s", diffText(golden, api))
	}
	return nil
}

// CheckKernelDeps: every package the kernel depends on (go list -deps
// ./kernel/..., outside the standard library) is a kernel package of
// module, and the set is the baseline's.
func CheckKernelDeps(ctx context.Context, goCmd, root, module, baseline string, r *KernelReport) error {
	deps, err := boundary.KernelDeps(ctx, goCmd, root)
	if err != nil {
		return wrap(PartKernel, err)
	}
	r.Deps = deps
	for _, d := range deps {
		if d != module+"/kernel" && !strings.HasPrefix(d, module+"/kernel/") {
			return fail(PartKernel, "the kernel depends on %s, which is not a kernel package", d)
		}
	}
	if want := lines(baseline); len(boundary.Diff(want, deps)) > 0 || len(boundary.Diff(deps, want)) > 0 {
		return fail(PartKernel, "the kernel's dependency set changed since the boundary was proven:\n%s", diffText(want, deps))
	}
	return nil
}

// CheckKernelWords: no kernel identifier, string literal or declaration
// comment (test files included) names a pair, worker, plugin, handoff or
// any other word of ProofWords, checked with archtest's own checker.
func CheckKernelWords(root string, r *KernelReport) error {
	r.Words = ProofWords()
	vs, err := boundary.KernelWords(root, boundary.NewForms(r.Words))
	if err != nil {
		return wrap(PartKernel, err)
	}
	r.Violations = len(vs)
	if len(vs) > 0 {
		msg := make([]string, len(vs))
		for i, v := range vs {
			msg[i] = v.String()
		}
		return fail(PartKernel, "the kernel names what it must not know:\n\t%s", strings.Join(msg, "\n\t"))
	}
	return nil
}

// CheckKernel runs the three no-kernel-change checks on the module at root
// against the committed baselines.
func CheckKernel(ctx context.Context, root string) (KernelReport, error) {
	var r KernelReport
	module, err := ModulePath(root)
	if err != nil {
		return r, wrap(PartKernel, err)
	}
	goCmd, err := GoCommand()
	if err != nil {
		return r, wrap(PartKernel, err)
	}
	return r, errors.Join(
		CheckKernelAPI(root, baselineAPI, &r),
		CheckKernelDeps(ctx, goCmd, root, module, baselineDeps, &r),
		CheckKernelWords(root, &r),
	)
}

// ModulePath reads the module line of root/go.mod.
func ModulePath(root string) (string, error) {
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
	return "", errors.New("acceptance: " + root + "/go.mod has no module line")
}

// GoCommand returns the go command of the toolchain that built the test,
// or the one on PATH.
func GoCommand() (string, error) {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
		return p, nil
	}
	return exec.LookPath("go")
}
