package acceptance

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestLedger_KernelSentencesStateWhatTheCheckFound: the dependency scan
// of a kernel that imports another layer and has an added exported
// function says so, and the kernel row says why it failed; no sentence
// claims what the checks contradict.
func TestLedger_KernelSentencesStateWhatTheCheckFound(t *testing.T) {
	root := fixture(t, map[string]string{
		"lib/lib.go":    "package lib\n\nconst V = 1\n",
		"kernel/x/x.go": "package x\n\nimport \"example.com/fixture/lib\"\n\nconst V = lib.V\n\nfunc Added() {}\n",
		GoldenPath:      "kernel/x const V untyped int = 1\n",
	})
	goCmd, err := GoCommand()
	require.NoError(t, err)
	var r KernelReport
	err = errors.Join(
		CheckKernelAPI(root, "kernel/x const V untyped int = 1\n", &r),
		CheckKernelDeps(context.Background(), goCmd, root, "example.com/fixture", "example.com/fixture/kernel/x\n", &r),
		CheckKernelWords(root, &r),
	)
	requireBreak(t, err, PartKernel, "depends on example.com/fixture/lib", "kernel/x func Added()")
	l := Ledger{Kernel: r, Parts: []PartResult{Row(PartKernel, "TestBoundaryProof/no_kernel_change", "all kernel", err)}}
	text := string(l.Render())
	require.Contains(t, text, "| no kernel change | `TestBoundaryProof/no_kernel_change` | FAIL | failed: ")
	require.Contains(t, text, "depends on example.com/fixture/lib")
	require.Contains(t, text, "2, of which 1 NOT kernel packages:\n  - example.com/fixture/lib")
	require.Contains(t, text, "(signatures, field types, constant values), NOT equal to the golden file: ")
	require.Contains(t, text, "added `kernel/x func Added()`")
	require.NotContains(t, text, "all kernel packages")
	require.NotContains(t, text, "values), equal to the golden file")
	require.Contains(t, text, "- dependency scans: no kernel change FAIL")
}

// TestLedger_NotProvenIsComputed: the list of evidence not yet proven
// follows the rows and the race detector.
func TestLedger_NotProvenIsComputed(t *testing.T) {
	l := Ledger{RaceDetector: true}
	for _, a := range allParts {
		l.Parts = append(l.Parts, PartResult{Part: a.part, Result: ResultPass})
	}
	require.Equal(t, []string{"generated DI source: " + Evidence[len(Evidence)-1].Note}, l.NotProven())

	l.Parts[3].Result = ResultFail // the provider
	l.Parts = l.Parts[:len(l.Parts)-2]
	l.RaceDetector = false
	np := l.NotProven()
	require.Contains(t, np, "real provider: real provider FAIL")
	require.Contains(t, np, "snapshot round trips: snapshot round trip not run")
	require.Contains(t, np, "dependency scans: no kernel change not run")
	require.Contains(t, np, "race tests: the suite ran without the race detector")
	require.Contains(t, string(l.Render()), "- real provider: real provider FAIL\n")
}

// TestLedgerTree: the committed ledger was measured on this tree: its tree
// line is the digest of the files the proof compiles, embeds or reads.
func TestLedgerTree(t *testing.T) {
	root := moduleRoot(t)
	committed, err := os.ReadFile(filepath.Join(root, LedgerPath))
	require.NoError(t, err)
	goCmd, err := GoCommand()
	require.NoError(t, err)
	tree, err := TreeDigest(context.Background(), goCmd, root)
	require.NoError(t, err)
	if !bytes.Contains(committed, []byte("("+tree.Platform+")")) {
		t.Skipf("the ledger was measured on another platform than %s", tree.Platform)
	}
	require.Equal(t, tree.Digest, LedgerTreeLine(committed), "%s is stale for this tree: run make proof and commit it", LedgerPath)
}

// TestTreeDigestFollowsTheFiles: changing a file a package is built from,
// or a kernel test file, changes the digest; a file outside changes
// nothing.
func TestTreeDigestFollowsTheFiles(t *testing.T) {
	root := fixture(t, map[string]string{
		"a/a.go":             "package a\n",
		"kernel/x/x.go":      "package x\n",
		"kernel/x/x_test.go": "package x\n",
		"docs/readme.md":     "text\n",
	})
	goCmd, err := GoCommand()
	require.NoError(t, err)
	digest := func() Tree {
		tr, err := treeDigest(context.Background(), goCmd, root, "./a")
		require.NoError(t, err)
		return tr
	}
	before := digest()
	require.Equal(t, 4, before.Files) // go.mod, a.go and the two kernel files
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "readme.md"), []byte("other\n"), 0o644))
	require.Equal(t, before, digest())
	for _, f := range []string{"a/a.go", "kernel/x/x_test.go"} {
		require.NoError(t, os.WriteFile(filepath.Join(root, f), []byte("package "+filepath.Base(filepath.Dir(f))+"\n\n// changed\n"), 0o644))
		after := digest()
		require.NotEqual(t, before.Digest, after.Digest, f)
		before = after
	}
}

// TestBreak_SuiteStopsAndTheLedgerSaysSo runs the suite (this test binary)
// with a plugin that exits before its handshake: the suite fails, and the
// ledger it writes says why and claims no part.
func TestBreak_SuiteStopsAndTheLedgerSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the suite in a child process")
	}
	out := filepath.Join(t.TempDir(), "LEDGER.md")
	cmd := exec.Command(os.Args[0], "-test.run=^TestBoundaryProof$", "-test.count=1", "-ledger", "-ledger-path="+out, "-fault=plugin-exits")
	cmd.Env = os.Environ()
	log, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "the suite passed with a plugin that exits:\n%s", log)
	b, err := os.ReadFile(out)
	require.NoError(t, err, "no ledger written:\n%s", log)
	text := string(b)
	require.Contains(t, text, "- The suite stopped early: playing the pair: ")
	require.Contains(t, text, "starting the plugin host")
	require.NotContains(t, text, "| pass |")
	for _, a := range allParts {
		require.Contains(t, text, "| "+a.part+" | `TestBoundaryProof/"+a.name+"` | not run | the suite stopped before this part")
	}
	require.Contains(t, text, "- real provider: real provider not run")
	require.True(t, strings.HasPrefix(text, ledgerTitle))
}
