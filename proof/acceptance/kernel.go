package acceptance

import (
	"bufio"
	"context"
	"crypto/sha256"
	_ "embed" // the baselines
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
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
// comment may use: archtest's list and "plugin", which the
// runtime tools are built from and the kernel must not know either.
func ProofWords() []string { return append(boundary.ForbiddenWords(), "plugin") }

// KernelReport is what the no-kernel-change checks measured; the
// ledger's dependency scan is written from it alone.
type KernelReport struct {
	// APIRead and GoldenRead say the kernel's API and the golden file
	// were read; the fields after each are meaningful only then.
	APIRead, GoldenRead bool
	APIEntries          int
	GoldenEntries       int
	GoldenSHA           string // SHA-256 of archtest's golden file
	// APIAdded and APIRemoved are what the kernel's API adds to and
	// lacks of the golden file; GoldenAdded and GoldenRemoved the same of
	// the golden file against the baseline.
	APIAdded, APIRemoved       []string
	GoldenAdded, GoldenRemoved []string
	DepsRead                   bool
	Deps                       []string // non-standard-library packages the kernel depends on
	DepsOutside                []string // those that are not kernel packages
	DepsAdded, DepsRemoved     []string // against the baseline
	WordsRead                  bool
	Words                      []string // the words checked
	Violations                 []string // each "file:line: message"
}

// Sentences is the ledger's dependency scan, each sentence stating what
// the check measured, whether it passed or not.
func (r KernelReport) Sentences() []string {
	var out []string
	list := func(head string, items []string) {
		out = append(out, head)
		for _, it := range items {
			out = append(out, "  - "+it)
		}
	}
	switch {
	case !r.GoldenRead:
		out = append(out, "- Kernel API: archtest's golden file `"+GoldenPath+"` could not be read.")
	case len(r.GoldenAdded)+len(r.GoldenRemoved) > 0:
		out = append(out, fmt.Sprintf("- Kernel API golden file `%s` (SHA-256 %s, %d entries) differs from the proof's baseline: %d added, %d removed.", GoldenPath, r.GoldenSHA, r.GoldenEntries, len(r.GoldenAdded), len(r.GoldenRemoved)))
	default:
		out = append(out, fmt.Sprintf("- Kernel API golden file `%s` (SHA-256 %s, %d entries) equals the proof's baseline.", GoldenPath, r.GoldenSHA, r.GoldenEntries))
	}
	switch {
	case !r.APIRead:
		out = append(out, "- Kernel API: the kernel's exported API could not be read.")
	case len(r.APIAdded)+len(r.APIRemoved) > 0:
		list(fmt.Sprintf("- Kernel API: %d entries (signatures, field types, constant values), NOT equal to the golden file: %d added, %d removed:", r.APIEntries, len(r.APIAdded), len(r.APIRemoved)),
			slices.Concat(prefixed("added ", r.APIAdded), prefixed("removed ", r.APIRemoved)))
	default:
		out = append(out, fmt.Sprintf("- Kernel API: %d entries (signatures, field types, constant values), equal to the golden file.", r.APIEntries))
	}
	switch {
	case !r.DepsRead:
		out = append(out, "- Kernel dependencies (`go list -deps ./kernel/...`): could not be listed.")
	case len(r.DepsOutside) > 0:
		list(fmt.Sprintf("- Kernel dependencies outside the standard library (`go list -deps ./kernel/...`): %d, of which %d NOT kernel packages:", len(r.Deps), len(r.DepsOutside)), r.DepsOutside)
	default:
		list(fmt.Sprintf("- Kernel dependencies outside the standard library (`go list -deps ./kernel/...`): %d, all kernel packages:", len(r.Deps)), r.Deps)
	}
	if r.DepsRead && len(r.DepsAdded)+len(r.DepsRemoved) > 0 {
		list(fmt.Sprintf("- The kernel's dependency set differs from the proof's baseline: %d added, %d removed:", len(r.DepsAdded), len(r.DepsRemoved)),
			slices.Concat(prefixed("added ", r.DepsAdded), prefixed("removed ", r.DepsRemoved)))
	}
	switch {
	case !r.WordsRead:
		out = append(out, "- Forbidden words in kernel identifiers, strings and declaration comments: the kernel could not be read.")
	case len(r.Violations) > 0:
		list(fmt.Sprintf("- Forbidden words in kernel identifiers, strings and declaration comments (%s): %d found:", strings.Join(r.Words, ", "), len(r.Violations)), r.Violations)
	default:
		out = append(out, fmt.Sprintf("- Forbidden words in kernel identifiers, strings and declaration comments (%s): none found.", strings.Join(r.Words, ", ")))
	}
	return out
}

func prefixed(p string, items []string) []string {
	out := make([]string, len(items))
	for i, it := range items {
		out[i] = p + "`" + it + "`"
	}
	return out
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
// kernel's exported API (with signatures, field types and constant
// values) is the golden file's. A deliberate kernel change updates the
// golden file; the proof then fails until it is proven again (renew the
// baselines deliberately with `go test ./proof/acceptance -run
// TestBoundaryProof -args -baseline`, then `make proof`).
func CheckKernelAPI(root, baseline string, r *KernelReport) error {
	raw, err := os.ReadFile(filepath.Join(root, GoldenPath))
	if err != nil {
		return fail(PartKernel, "reading archtest's golden file: %v", err)
	}
	r.GoldenRead = true
	sum := sha256.Sum256(raw)
	r.GoldenSHA = hex.EncodeToString(sum[:])
	golden := lines(string(raw))
	r.GoldenEntries = len(golden)
	want := lines(baseline)
	r.GoldenAdded, r.GoldenRemoved = boundary.Diff(want, golden), boundary.Diff(golden, want)
	api, err := boundary.KernelAPI(root)
	if err != nil {
		return errors.Join(goldenErr(r, want, golden), wrap(PartKernel, err))
	}
	r.APIRead = true
	r.APIEntries = len(api)
	r.APIAdded, r.APIRemoved = boundary.Diff(golden, api), boundary.Diff(api, golden)
	var apiErr error
	if len(r.APIAdded)+len(r.APIRemoved) > 0 {
		apiErr = fail(PartKernel, "the kernel's exported API is not archtest's golden file:\n%s", diffText(golden, api))
	}
	return errors.Join(goldenErr(r, want, golden), apiErr)
}

func goldenErr(r *KernelReport, want, golden []string) error {
	if len(r.GoldenAdded)+len(r.GoldenRemoved) > 0 {
		return fail(PartKernel, "archtest's kernel API golden file (%s) changed since the boundary was proven:\n%s", GoldenPath, diffText(want, golden))
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
	r.DepsRead = true
	r.Deps = deps
	r.DepsOutside = nil
	for _, d := range deps {
		if d != module+"/kernel" && !strings.HasPrefix(d, module+"/kernel/") {
			r.DepsOutside = append(r.DepsOutside, d)
		}
	}
	want := lines(baseline)
	r.DepsAdded, r.DepsRemoved = boundary.Diff(want, deps), boundary.Diff(deps, want)
	var errs []error
	for _, d := range r.DepsOutside {
		errs = append(errs, fail(PartKernel, "the kernel depends on %s, which is not a kernel package", d))
	}
	if len(r.DepsAdded)+len(r.DepsRemoved) > 0 {
		errs = append(errs, fail(PartKernel, "the kernel's dependency set changed since the boundary was proven:\n%s", diffText(want, deps)))
	}
	return errors.Join(errs...)
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
	r.WordsRead = true
	r.Violations = nil
	for _, v := range vs {
		r.Violations = append(r.Violations, v.String())
	}
	if len(vs) > 0 {
		return fail(PartKernel, "the kernel names what it must not know:\n\t%s", strings.Join(r.Violations, "\n\t"))
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
