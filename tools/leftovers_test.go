package tools_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/tools"
)

// The temporary files a killed fs.write left are removed, in every
// directory of the workspace; a recent one (a write in progress elsewhere),
// a look-alike name, a directory and anything behind a symbolic link are
// kept.
func TestRemoveLeftoversRemovesOnlyOldTemporaryFiles(t *testing.T) {
	ws := t.TempDir()
	outside := t.TempDir()
	now := time.Now()
	old := now.Add(-time.Hour)
	file := func(dir, name string, mtime time.Time) string {
		t.Helper()
		require.NoError(t, os.MkdirAll(dir, 0o755))
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte("partial"), 0o644))
		require.NoError(t, os.Chtimes(p, mtime, mtime))
		return p
	}
	tmp := tools.TempPrefix + "0123456789abcdef.tmp"
	gone := []string{file(ws, tmp, old), file(filepath.Join(ws, "a", "b"), tmp, old)}
	kept := []string{
		file(ws, tools.TempPrefix+"fedcba9876543210.tmp", now),         // recent
		file(ws, tools.TempPrefix+"notes.tmp", old),                    // not fs.write's
		file(ws, "draft"+tools.TempPrefix+"0123456789abcdef.tmp", old), // prefix inside
		file(outside, tmp, old),                                        // behind a link
	}
	require.NoError(t, os.Mkdir(filepath.Join(ws, tools.TempPrefix+"aaaaaaaaaaaaaaaa.tmp"), 0o755))
	require.NoError(t, os.Symlink(outside, filepath.Join(ws, "link")))

	n, err := tools.RemoveLeftovers(ws, now.Add(-time.Minute))
	require.NoError(t, err)
	require.Equal(t, len(gone), n)
	for _, p := range gone {
		require.NoFileExists(t, p)
	}
	for _, p := range kept {
		require.FileExists(t, p)
	}
	require.DirExists(t, filepath.Join(ws, tools.TempPrefix+"aaaaaaaaaaaaaaaa.tmp"))
}
