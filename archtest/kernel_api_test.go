package archtest

import (
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/proof/boundary"
)

var update = flag.Bool("update", false, "rewrite testdata/kernel_api.golden from the kernel as it is now")

const kernelAPIGolden = "testdata/kernel_api.golden"

// TestKernelAPI pins the kernel's exported API and its event kinds: every
// exported type (with its underlying type), function and method (with its
// signature), struct field (with its type), interface method, constant
// (with its type and value) and variable (with its type) of every non-test
// file under kernel/, package-qualified, plus every run event kind. Work above the kernel (workers,
// handoff, orchestrator, scheduler) must not need the kernel to grow; a
// change here is a kernel change and is made deliberately:
//
//	go test ./archtest -run KernelAPI -update
func TestKernelAPI(t *testing.T) {
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	got, err := boundary.KernelAPI(root)
	require.NoError(t, err)
	if *update {
		require.NoError(t, os.WriteFile(kernelAPIGolden, []byte(strings.Join(got, "\n")+"\n"), 0o644))
		t.Logf("wrote %s (%d entries)", kernelAPIGolden, len(got))
		return
	}
	b, err := os.ReadFile(kernelAPIGolden)
	require.NoError(t, err, "missing golden file; create it deliberately with: go test ./archtest -run KernelAPI -update")
	want := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	slices.Sort(want) // a hand-edited golden may be out of order
	added, removed := diff(want, got), diff(got, want)
	if len(added)+len(removed) > 0 {
		t.Errorf("the kernel's exported API or event kinds changed.\n"+
			"added:\n\t%s\nremoved:\n\t%s\n"+
			"If this change to the kernel is deliberate, update the golden file with:\n"+
			"\tgo test ./archtest -run KernelAPI -update\n"+
			"and review the diff of %s.",
			strings.Join(added, "\n\t"), strings.Join(removed, "\n\t"), kernelAPIGolden)
	}
}

// diff returns the entries of b that are not in a; both are sorted.
func diff(a, b []string) []string {
	var out []string
	for _, s := range b {
		if _, ok := slices.BinarySearch(a, s); !ok {
			out = append(out, s)
		}
	}
	return out
}
