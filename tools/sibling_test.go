package tools_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/tools"
)

// A sibling directory whose name starts with the workspace's ("ws2" beside
// "ws") is outside it: reached through a link or a relative path, every
// tool answers with the model-visible path_outside_workspace, never an
// I/O failure, and touches nothing there: a bare prefix test would take
// "/ws2" for inside "/ws".
func TestK7_ASiblingWithTheWorkspacesNameAsPrefixIsOutside(t *testing.T) {
	e := newEnv(t)
	sibling := e.root + "2"
	require.NoError(t, os.Mkdir(sibling, 0o755))
	secret := filepath.Join(sibling, "secret.txt")
	require.NoError(t, os.WriteFile(secret, []byte("sibling secret"), 0o644))
	require.NoError(t, os.Symlink(secret, filepath.Join(e.root, "file-link")))
	require.NoError(t, os.Symlink(sibling, filepath.Join(e.root, "dir-link")))

	for _, path := range []string{"file-link", "dir-link/secret.txt", "dir-link/new.txt", "../ws2/secret.txt"} {
		e.problem(t, tools.CodeOutsideWorkspace, tools.NameFSRead, `{"path":"`+path+`"}`)
		e.problem(t, tools.CodeOutsideWorkspace, tools.NameFSWrite, `{"path":"`+path+`","content":"overwritten"}`)
	}
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "sibling secret", string(got), "nothing was written there")
	_, err = os.Stat(filepath.Join(sibling, "new.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
