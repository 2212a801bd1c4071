package acceptance

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Results of a part in the ledger.
const (
	ResultPass     = "pass"
	ResultFail     = "FAIL"
	ResultNotRun   = "not run"
	ledgerTree     = "- Tree: "
	ledgerTitle    = "# Boundary proof ledger"
	LedgerPath     = "proof/LEDGER.md"
	maxLedgerBytes = 1 << 20
	// maxCell bounds the evidence of one row.
	maxCell = 1200
)

// FixturePlugin and PanicPlugin are the plugins the proof builds.
const (
	FixturePlugin = "plugins/fixtures/goplugin"
	PanicPlugin   = "proof/acceptance/internal/panicplugin"
)

// PartResult is one row of the ledger.
type PartResult struct {
	Part     string
	Test     string // the test that proves it
	Result   string
	Evidence string
}

// Row is the ledger row of a check: its evidence when err is nil, else
// FAIL and the check's own failure.
func Row(part, test, evidence string, err error) PartResult {
	if err != nil {
		return PartResult{Part: part, Test: test, Result: ResultFail, Evidence: "failed: " + cell(err.Error())}
	}
	return PartResult{Part: part, Test: test, Result: ResultPass, Evidence: evidence}
}

// cell makes s one Markdown table cell: one line, no column break,
// bounded.
func cell(s string) string {
	s = strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " / ")), " ")
	s = strings.ReplaceAll(s, "|", "\\|")
	if len(s) > maxCell {
		s = strings.ToValidUTF8(s[:maxCell], "") + " …"
	}
	return s
}

// Outcomes are what this suite's injections and plays came to.
type Outcomes struct {
	Plays int
	// Cancelled counts, of the cancellation points, the pairs that ended
	// cancelled, and Decided those whose approval was already decided;
	// CancelPoints is how many were played.
	CancelPoints, Cancelled, Decided int
	// Panics were injected; Contained ended worker_failed as required.
	Panics, Contained int
}

// Tree ties the ledger to the files it was measured on.
type Tree struct {
	Digest   string
	Files    int
	Platform string // GOOS/GOARCH, which selects the files
}

// Ledger is what `make proof` writes to proof/LEDGER.md.
type Ledger struct {
	Tree         Tree
	GoVersion    string
	RaceDetector bool
	Parts        []PartResult
	// Stopped says why the suite stopped before every part ran, or is "".
	Stopped     string
	Modules     []string // "path version"
	Transcripts []string // "name sha256"
	Kernel      KernelReport
	Outcomes    Outcomes
	// Plugin is the runtime-tool part's fixture, when it ran.
	Plugin *PluginRecord
	// Trip is the snapshot round trip, when it passed.
	Trip *Trip
}

// PluginRecord is the plugin fixture the runtime-tool part ran: its
// build, its pinned digest and its generation/lease timeline.
type PluginRecord struct {
	Package, Build string
	Digests        []string
	Timeline       []string
}

// Evidence names the boundary proof's acceptance evidence (the parts the
// kernel boundary must carry without growing) and the parts whose passing
// rows prove each; an item with no part is never proven here.
var Evidence = []struct {
	Item  string
	Parts []string
	Note  string // why it is not proven when it has no part
}{
	{"real provider", []string{PartProvider}, ""},
	{"compiled tool", []string{PartTool}, ""},
	{"runtime tool", []string{PartRuntime}, ""},
	{"required persistence observer", []string{PartObserver}, ""},
	{"alternate client", []string{PartClient}, ""},
	{"two-worker extension", []string{PartTwoWorker}, ""},
	{"dependency scans", []string{PartKernel}, ""},
	{"race tests", nil, ""},
	{"cancellation and panic tests", []string{PartCancel, PartPanic}, ""},
	{"snapshot round trips", []string{PartSnapshot}, ""},
	{"generated DI source", nil, "no part of this proof covers it: the module wires the pair with plain constructors, and there is no generated wiring to retain"},
}

// NotProven lists the acceptance evidence the ledger's rows do not prove:
// an item whose parts did not all pass (or did not run), race tests when
// the suite ran without the race detector or any part failed, and items no
// part covers.
func (l Ledger) NotProven() []string {
	res := make(map[string]string)
	allPass := len(l.Parts) > 0
	for _, r := range l.Parts {
		res[r.Part] = r.Result
		allPass = allPass && r.Result == ResultPass
	}
	var out []string
	for _, e := range Evidence {
		switch {
		case e.Item == "race tests":
			if !l.RaceDetector {
				out = append(out, e.Item+": the suite ran without the race detector")
			} else if !allPass {
				out = append(out, e.Item+": not every part passed under the race detector")
			}
		case len(e.Parts) == 0:
			out = append(out, e.Item+": "+e.Note)
		default:
			var bad []string
			for _, p := range e.Parts {
				if r := res[p]; r != ResultPass {
					if r == "" {
						r = ResultNotRun
					}
					bad = append(bad, p+" "+r)
				}
			}
			if len(bad) > 0 {
				out = append(out, e.Item+": "+strings.Join(bad, ", "))
			}
		}
	}
	return out
}

// Render writes the ledger. It is a function of the tree and the suite's
// results only, so two runs on one tree render the same bytes.
func (l Ledger) Render() []byte {
	var b bytes.Buffer
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("%s", ledgerTitle)
	p("")
	p("Written by `make proof` from what `proof/acceptance` measured (the")
	p("boundary proof of docs/architecture.md), also when the suite fails; do")
	p("not edit by hand.")
	p("The tree line is the SHA-256 of `sha256sum` lines (digest, two spaces,")
	p("path, sorted by path) of every file the proof compiles, embeds or reads;")
	p("`TestLedgerTree` recomputes it, and `TestBoundaryProof` fails when any")
	p("line of this file differs from what it measured.")
	p("")
	p("%s%s, %d files (%s)", ledgerTree, l.Tree.Digest, l.Tree.Files, l.Tree.Platform)
	p("- Go: %s, race detector: %s", l.GoVersion, onOff(l.RaceDetector))
	if l.Stopped != "" {
		p("- The suite stopped early: %s", cell(l.Stopped))
	}
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
	np := l.NotProven()
	if len(np) == 0 {
		p("None: every item of the acceptance evidence has a passing row.")
	}
	for _, e := range np {
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
	if tr := l.Trip; tr != nil {
		p("## Snapshot round trip")
		p("")
		p("- Run %s: the pair's writer (its definition, its provider over loopback HTTP, its transcripts and tools, a SQLite store of its own) playing its first run alone, suspended after turn %d at event %d; its snapshot, %d bytes, decodes and encodes to the same bytes.", tr.RunID, tr.Turns, tr.SuspendedAt, tr.SnapshotBytes)
		p("- Resumed in a fresh engine and finished: its %d events in the store equal the uninterrupted run's byte for byte.", tr.Events)
		p("")
	}
	p("## Dependency scan")
	p("")
	for _, s := range l.Kernel.Sentences() {
		p("%s", s)
	}
	p("")
	p("## Real dependencies (`go list -m`)")
	p("")
	for _, m := range l.Modules {
		p("- %s", m)
	}
	p("")
	p("## Model server transcripts (SHA-256)")
	p("")
	p("Written for the proof in each server's wire format (`proof/acceptance/testdata/README.md`).")
	p("")
	for _, t := range l.Transcripts {
		p("- %s", t)
	}
	p("")
	p("## Outcomes of this suite")
	p("")
	o := l.Outcomes
	p("- Pair plays: %d.", o.Plays)
	p("- Cancellation: %d timeline boundaries played; %d pairs ended cancelled, %d had already decided their approval, %d ended otherwise.", o.CancelPoints, o.Cancelled, o.Decided, o.CancelPoints-o.Cancelled-o.Decided)
	p("- Panics: %d injected (provider, compiled tool, plugin tool); %d contained (pair.failed worker_failed, no panic text in any event).", o.Panics, o.Contained)
	return b.Bytes()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// StaleLines compares a committed ledger with a fresh one and returns the
// lines that differ ("-" committed, "+" fresh), or nil when the committed
// one is current.
func StaleLines(committed, fresh []byte) []string {
	split := func(b []byte) []string {
		var out []string
		for l := range strings.Lines(string(b)) {
			out = append(out, strings.TrimRight(l, "\n"))
		}
		return out
	}
	a, b := split(committed), split(fresh)
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

// LedgerTreeLine returns the tree line's digest of a ledger, or "".
func LedgerTreeLine(ledger []byte) string {
	for l := range strings.Lines(string(ledger)) {
		if rest, ok := strings.CutPrefix(l, ledgerTree); ok {
			d, _, _ := strings.Cut(rest, ",")
			return d
		}
	}
	return ""
}

// TreeDigest digests the files of the module at root that the proof
// compiles, embeds or reads: every file go list names for the packages it
// builds (the suite with its tests, the plugins it builds) and their
// module dependencies, every file under kernel/ (the word check reads
// test files too), archtest's golden file, go.mod and go.sum. The digest
// is the SHA-256 of `sha256sum` lines sorted by path.
func TreeDigest(ctx context.Context, goCmd, root string) (Tree, error) {
	return treeDigest(ctx, goCmd, root, "./proof/acceptance", "./"+FixturePlugin, "./"+PanicPlugin)
}

func treeDigest(ctx context.Context, goCmd, root string, pkgs ...string) (Tree, error) {
	// One line per file: the package's import path, its directory and
	// the file. The test main package of a test build is generated in the
	// build cache and left out.
	each := func(list string) string {
		return `{{range .` + list + `}}{{$p}}{{"\t"}}{{$d}}{{"\t"}}{{.}}{{"\n"}}{{end}}`
	}
	tmpl := `{{if .Module}}{{if .Module.Main}}{{$p := .ImportPath}}{{$d := .Dir}}` +
		each("GoFiles") + each("CgoFiles") + each("EmbedFiles") + each("TestGoFiles") + each("XTestGoFiles") + each("TestEmbedFiles") +
		`{{end}}{{end}}`
	out, err := run(ctx, root, goCmd, append([]string{"list", "-deps", "-test", "-f", tmpl}, pkgs...)...)
	if err != nil {
		return Tree{}, err
	}
	files := map[string]bool{"go.mod": true, "go.sum": true, GoldenPath: true}
	for _, l := range lines(out) {
		pkg, rest, _ := strings.Cut(l, "\t")
		dir, file, _ := strings.Cut(rest, "\t")
		if strings.HasSuffix(pkg, ".test") || filepath.IsAbs(file) {
			continue
		}
		rel, err := filepath.Rel(root, filepath.Join(dir, file))
		if err != nil || strings.HasPrefix(rel, "..") {
			return Tree{}, fmt.Errorf("%s is outside the module: %v", filepath.Join(dir, file), err)
		}
		files[filepath.ToSlash(rel)] = true
	}
	err = filepath.WalkDir(filepath.Join(root, "kernel"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		files[filepath.ToSlash(rel)] = true
		return err
	})
	if err != nil {
		return Tree{}, err
	}
	names := slices.Sorted(maps.Keys(files))
	h := sha256.New()
	count := 0
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(n)))
		if errors.Is(err, fs.ErrNotExist) && (n == "go.sum" || n == GoldenPath) {
			continue
		}
		if err != nil {
			return Tree{}, err
		}
		count++
		sum := sha256.Sum256(b)
		fmt.Fprintf(h, "%s  %s\n", hex.EncodeToString(sum[:]), n)
	}
	return Tree{Digest: hex.EncodeToString(h.Sum(nil)), Files: count, Platform: runtime.GOOS + "/" + runtime.GOARCH}, nil
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
