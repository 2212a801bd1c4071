package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/tools"
)

// A spec's workspace stays inside the spec's folder: validate and run
// refuse an absolute path, a path through "..", and a symbolic link (or a
// dangling one) that leads out, naming the line; run writes nothing
// outside. Only --workspace on the command line writes elsewhere.
func TestSpecWorkspaceStaysInsideTheSpecFolder(t *testing.T) {
	outside := t.TempDir()
	for name, c := range map[string]struct {
		workspace string
		setup     func(t *testing.T, dir string)
		msg       string
	}{
		"absolute":       {workspace: outside, msg: "must be a relative path inside the spec's folder"},
		"etc":            {workspace: "/etc", msg: "must be a relative path inside the spec's folder"},
		"parent":         {workspace: "../../..", msg: "must be a relative path inside the spec's folder"},
		"through parent": {workspace: "a/../../x", msg: "must be a relative path inside the spec's folder"},
		"symlink out": {workspace: "link", msg: "leads outside the spec's folder",
			setup: func(t *testing.T, dir string) { require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link"))) }},
		"below a symlink out": {workspace: "link/sub/deeper", msg: "leads outside the spec's folder",
			setup: func(t *testing.T, dir string) { require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link"))) }},
		"dangling symlink out": {workspace: "link/sub", msg: "goes through a symbolic link that resolves to nothing",
			setup: func(t *testing.T, dir string) {
				require.NoError(t, os.Symlink(filepath.Join(outside, "missing"), filepath.Join(dir, "link")))
			}},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if c.setup != nil {
				c.setup(t, dir)
			}
			file := writeFile(t, dir, "pair.yaml", validSpec+"workspace: "+c.workspace+"\n")
			want := file + ":7: workspace: " + c.msg

			_, stderr, code := call(t, nil, "validate", file)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, want)

			_, stderr, code = call(t, nil, "run", file, "--no-store")
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stderr, want)
			entries, err := os.ReadDir(outside)
			require.NoError(t, err)
			require.Empty(t, entries, "run wrote outside the spec's folder")
		})
	}
}

// A workspace inside the spec's folder works, through a symbolic link that
// stays inside too, and --workspace may name any directory.
func TestSpecWorkspaceInsideAndTheFlagOutside(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(dir, "real"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "link")))
	file := writeFile(t, dir, "pair.yaml", validSpec+"workspace: link/out\n")
	stdout, stderr, code := call(t, nil, "validate", file)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "valid")
	stdout, stderr, code = call(t, nil, "run", file, "--no-store")
	require.Equal(t, 0, code, stderr)
	require.DirExists(t, filepath.Join(dir, "real", "out"))
	require.True(t, strings.Contains(stdout, filepath.Join(dir, "real", "out")), stdout)

	outside := t.TempDir()
	_, stderr, code = call(t, nil, "run", file, "--no-store", "--workspace", outside)
	require.Equal(t, 0, code, stderr)
	require.FileExists(t, filepath.Join(outside, "draft.md"))
}

// A temporary file a killed fs.write left in the workspace is removed by
// the next run there.
func TestRunRemovesTheTemporaryFilesOfAKilledWrite(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "pair.yaml", validSpec+"workspace: out\n")
	leftover := filepath.Join(dir, "out", "notes", tools.TempPrefix+"0123456789abcdef.tmp")
	require.NoError(t, os.MkdirAll(filepath.Dir(leftover), 0o755))
	require.NoError(t, os.WriteFile(leftover, []byte("half a draft"), 0o644))
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(leftover, old, old))

	_, stderr, code := call(t, nil, "run", file, "--no-store")
	require.Equal(t, 0, code, stderr)
	require.NoFileExists(t, leftover)
	require.Contains(t, stderr, "removed 1 temporary file(s) an interrupted fs.write left in the workspace")
}
