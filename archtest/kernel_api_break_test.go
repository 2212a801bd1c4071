package archtest

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/proof/boundary"
)

// copyKernel copies go.mod and kernel/ of the module into a temporary
// module root, applying edit to the file at rel.
func copyKernel(t *testing.T, rel, old, new string) string {
	t.Helper()
	src, err := filepath.Abs("..")
	require.NoError(t, err)
	dst := t.TempDir()
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dst, "go.mod"), gomod, 0o644))
	edited := false
	err = filepath.WalkDir(filepath.Join(src, "kernel"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		r, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, r), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if filepath.ToSlash(r) == rel {
			require.Contains(t, string(b), old)
			b, edited = []byte(strings.Replace(string(b), old, new, 1)), true
		}
		return os.WriteFile(filepath.Join(dst, r), b, 0o644)
	})
	require.NoError(t, err)
	require.True(t, edited, "no file %s", rel)
	return dst
}

// TestKernelAPI_PinsSignaturesFieldTypesAndValues changes, in a copy of
// the kernel, what a names-only listing would not see: a parameter and a
// constant's value (and, as a check of the harness, a new field). Each
// changes the listing, so the golden file comparison of TestKernelAPI
// fails.
func TestKernelAPI_PinsSignaturesFieldTypesAndValues(t *testing.T) {
	golden, err := os.ReadFile(kernelAPIGolden)
	require.NoError(t, err)
	want := strings.Split(strings.TrimSuffix(string(golden), "\n"), "\n")
	for _, c := range []struct {
		name, file, old, new string
		added                string
	}{
		{"variadic added", "kernel/bound/bound.go", "func Missing(field string) error {", "func Missing(field string, _ ...any) error {",
			"kernel/bound func Missing(field string, _ ...any) error"},
		{"constant value", "kernel/bound/bound.go", "MaxTextDeltaBytes        = 64 << 10", "MaxTextDeltaBytes        = 1 << 20",
			"kernel/bound const MaxTextDeltaBytes untyped int = 1048576"},
		{"new field", "kernel/engine/config.go", "	Broker   interaction.Broker // optional", "	Broker   interaction.Broker // optional\n\tBrokers []interaction.Broker //",
			"kernel/engine field Config.Brokers []interaction.Broker"},
	} {
		t.Run(c.name, func(t *testing.T) {
			root := copyKernel(t, c.file, c.old, c.new)
			got, err := boundary.KernelAPI(root)
			require.NoError(t, err)
			require.Contains(t, diff(want, got), c.added)
		})
	}
}
