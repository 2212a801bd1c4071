package acceptance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Results of a part in the ledger.
const (
	ResultPass     = "pass"
	ResultFail     = "FAIL"
	ResultNotYet   = "not yet proven"
	ledgerDate     = "- Date: "
	ledgerCommit   = "- Commit: "
	ledgerTitle    = "# Boundary proof ledger"
	LedgerPath     = "proof/LEDGER.md"
	maxLedgerBytes = 1 << 20
)

// PartResult is one row of the ledger.
type PartResult struct {
	Part     string
	Test     string // the test that proves it, or the extension point awaited
	Result   string
	Evidence string
}

// Counts are the test counts of the module the ledger records.
type Counts struct {
	Tests, Fuzz, Benchmarks         int // every TestXxx, FuzzXxx, BenchmarkXxx of the module
	Cancel, Panic, Snapshot, Race   int // tests whose names say they test that
	CancelPoints, PanicPoints, Runs int // this suite's injections and pair plays
}

// Ledger is what `make proof` writes to proof/LEDGER.md.
type Ledger struct {
	Date, Commit, GoVersion string
	RaceDetector            bool
	Parts                   []PartResult
	Extensions              []string // "name: what it awaits"
	Modules                 []string // "path version"
	Transcripts             []string // "name sha256"
	Kernel                  KernelReport
	Counts                  Counts
	// Plugin is the runtime-tool part's fixture, when it ran.
	Plugin *PluginRecord
}

// PluginRecord is the plugin fixture the runtime-tool part ran: its
// build, its pinned digest and its generation/lease timeline.
type PluginRecord struct {
	Package, Build string
	Digests        []string
	Timeline       []string
}

// Render writes the ledger. Everything but the date and commit lines is a
// function of the tree and the suite's results, so two runs on one tree
// render the same bytes apart from those two lines.
func (l Ledger) Render() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("%s", ledgerTitle)
	p("")
	p("Written by `make proof` from what `proof/acceptance` measured (RFC 0001,")
	p("\"Acceptance evidence\"); do not edit by hand. `TestBoundaryProof` fails when")
	p("this file is stale for the tree, comparing every line but the date and commit.")
	p("")
	p("%s%s", ledgerDate, l.Date)
	p("%s%s", ledgerCommit, l.Commit)
	p("- Go: %s, race detector: %s", l.GoVersion, onOff(l.RaceDetector))
	p("")
	p("## Parts")
	p("")
	p("| part | proving test | result | evidence |")
	p("|---|---|---|---|")
	for _, r := range l.Parts {
		p("| %s | `%s` | %s | %s |", r.Part, r.Test, r.Result, r.Evidence)
	}
	p("")
	p("## Extension points not yet proven")
	p("")
	if len(l.Extensions) == 0 {
		p("None.")
	}
	for _, e := range l.Extensions {
		p("- %s", e)
	}
	p("")
	if pl := l.Plugin; pl != nil {
		p("## Runtime tool plugin")
		p("")
		p("- Fixture: `%s`, built with `%s`.", pl.Package, pl.Build)
		for _, d := range pl.Digests {
			p("- SHA-256 (pinned, verified by the host at launch): %s", d)
		}
		p("- Generation/lease timeline of the pair's plan source:")
		for i, e := range pl.Timeline {
			p("  %d. %s", i+1, e)
		}
		p("")
	}
	p("## Dependency scan")
	p("")
	p("- Kernel API: %d entries, equal to `%s` (SHA-256 %s) and to the proof's baseline.", l.Kernel.APIEntries, GoldenPath, l.Kernel.GoldenSHA)
	p("- Kernel dependencies outside the standard library (`go list -deps ./kernel/...`): %d, all kernel packages:", len(l.Kernel.Deps))
	for _, d := range l.Kernel.Deps {
		p("  - %s", d)
	}
	p("- Forbidden words in kernel identifiers, strings and declaration comments (%s): %d found.", strings.Join(l.Kernel.Words, ", "), l.Kernel.Violations)
	p("")
	p("## Real dependencies (`go list -m`)")
	p("")
	for _, m := range l.Modules {
		p("- %s", m)
	}
	p("")
	p("## Recorded transcripts (SHA-256)")
	p("")
	for _, t := range l.Transcripts {
		p("- %s", t)
	}
	p("")
	p("## Test counts")
	p("")
	c := l.Counts
	p("- Module: %d tests, %d fuzz targets, %d benchmarks; `make test` runs every test with `-race -shuffle=on`.", c.Tests, c.Fuzz, c.Benchmarks)
	p("- Named for cancellation: %d; for panics: %d; for snapshots: %d; for races: %d.", c.Cancel, c.Panic, c.Snapshot, c.Race)
	p("- This suite: %d pair plays, a cancellation at each of %d timeline boundaries, %d panic injections (provider, compiled tool and plugin tool).", c.Runs, c.CancelPoints, c.PanicPoints)
	return b.Bytes()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// StaleLines compares a committed ledger with a fresh one, ignoring the
// date and commit lines, and returns the lines that differ ("-" committed,
// "+" fresh), or nil when the committed one is current.
func StaleLines(committed, fresh []byte) []string {
	keep := func(b []byte) []string {
		var out []string
		for l := range strings.Lines(string(b)) {
			l = strings.TrimRight(l, "\n")
			if !strings.HasPrefix(l, ledgerDate) && !strings.HasPrefix(l, ledgerCommit) {
				out = append(out, l)
			}
		}
		return out
	}
	a, b := keep(committed), keep(fresh)
	if slices.Equal(a, b) {
		return nil
	}
	var out []string
	for i := range max(len(a), len(b)) {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y {
			out = append(out, fmt.Sprintf("line %d:\n-%s\n+%s", i+1, x, y))
		}
	}
	return out
}

// CountTests counts the test, fuzz and benchmark functions of every
// _test.go file under root (testdata excluded), and those whose names say
// they test cancellation, panics, snapshots or races.
func CountTests(root string) (Counts, error) {
	var c Counts
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "testdata" || n == "node_modules" || strings.HasPrefix(n, ".") && path != root {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for _, n := range funcNames(f) {
			switch {
			case isTestName(n, "Test") && n != "TestMain":
				c.Tests++
				c.Cancel += has(n, "Cancel")
				c.Panic += has(n, "Panic")
				c.Snapshot += has(n, "Snapshot")
				c.Race += has(n, "Race")
			case isTestName(n, "Fuzz"):
				c.Fuzz++
			case isTestName(n, "Benchmark"):
				c.Benchmarks++
			}
		}
		return nil
	})
	return c, err
}

func has(name, word string) int {
	if strings.Contains(name, word) {
		return 1
	}
	return 0
}

// isTestName is the go tool's rule: prefix, then nothing or a
// non-lower-case letter.
func isTestName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && (rest == "" || !(rest[0] >= 'a' && rest[0] <= 'z'))
}

// TranscriptDigests names every embedded transcript with its SHA-256.
func TranscriptDigests() ([]string, error) {
	entries, err := transcripts.ReadDir("testdata")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		b, err := transcripts.ReadFile("testdata/" + e.Name())
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		out = append(out, e.Name()+" "+hex.EncodeToString(sum[:]))
	}
	return out, nil
}

// RealModules are the third-party modules the proven parts run on.
var RealModules = []string{"github.com/openai/openai-go/v3", "modernc.org/sqlite", "modernc.org/libc",
	"google.golang.org/grpc", "google.golang.org/protobuf", "github.com/hashicorp/go-memdb"}

// ModuleVersions asks `go list -m` for the versions of RealModules.
func ModuleVersions(ctx context.Context, goCmd, root string) ([]string, error) {
	args := append([]string{"list", "-m", "-f", "{{.Path}} {{.Version}}"}, RealModules...)
	out, err := run(ctx, root, goCmd, args...)
	if err != nil {
		return nil, err
	}
	return lines(out), nil
}

// Commit returns the commit of the tree at root, or "unknown" outside git.
func Commit(ctx context.Context, root string) string {
	out, err := run(ctx, root, "git", "rev-parse", "HEAD")
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(out)
}

func run(ctx context.Context, dir, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, stderr.Bytes())
	}
	return stdout.String(), nil
}

// funcNames returns the names of the top-level functions (not methods) f
// declares.
func funcNames(f *ast.File) []string {
	var out []string
	for _, d := range f.Decls {
		if fd, ok := d.(*ast.FuncDecl); ok && fd.Recv == nil {
			out = append(out, fd.Name.Name)
		}
	}
	return out
}
