package tools

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

var errInjected = errors.New("injected disk failure")

func writeCall(t *testing.T) tool.Call {
	c, err := tool.NewCall("call-1", NameFSWrite, []byte(`{"path":"d/draft.md","content":"new"}`))
	require.NoError(t, err)
	return c
}

func dispatch(t *testing.T, w *FSWrite) error {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{w}})
	require.NoError(t, err)
	_, err = d.Dispatch(context.Background(), writeCall(t), nil)
	return err
}

func requireNoTemp(t *testing.T, dir string) {
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	for _, e := range entries {
		require.False(t, strings.HasPrefix(e.Name(), TempPrefix), e.Name())
	}
}

func TestK7_FailuresAfterTheRenameMayHaveHappenedAreUncertain(t *testing.T) {
	root := t.TempDir()
	w, err := NewFSWrite(Config{Root: root})
	require.NoError(t, err)
	w.sync = func(*os.Root, string) error { return errInjected }
	err = dispatch(t, w)
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	require.Equal(t, tool.NoRetry, ee.Retry())
	require.Equal(t, CodeWriteUncertain, ee.Problem().Code())
	require.ErrorIs(t, err, errInjected)
	b, err := os.ReadFile(filepath.Join(root, "d", "draft.md"))
	require.NoError(t, err)
	require.Equal(t, "new", string(b))
	requireNoTemp(t, filepath.Join(root, "d"))
}

func TestK7_AFailedRenameIsUncertainAndLeavesNoTemp(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "draft.md"), []byte("old"), 0o644))
	w, err := NewFSWrite(Config{Root: root})
	require.NoError(t, err)
	w.rename = func(*os.Root, string, string) error { return errInjected }
	err = dispatch(t, w)
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	b, err := os.ReadFile(filepath.Join(root, "d", "draft.md"))
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	requireNoTemp(t, filepath.Join(root, "d"))
}

func TestK7_FailuresBeforeTheRenameAreDefinitive(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "draft.md"), []byte("old"), 0o644))
	w, err := NewFSWrite(Config{Root: root})
	require.NoError(t, err)
	// The root vanishes between the check and the write: nothing written.
	w.rename = func(*os.Root, string, string) error { panic("rename reached") }
	require.NoError(t, os.RemoveAll(root))
	err = dispatch(t, w)
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.Equal(t, CodeIOError, ee.Problem().Code())
}

func TestK8_CancellationBeforeTheRenameLeavesTheFileUnchanged(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(root, "d"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "d", "draft.md"), []byte("old"), 0o644))
	w, err := NewFSWrite(Config{Root: root})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w.rename = func(*os.Root, string, string) error { panic("rename reached") }
	// A cancellation that arrives after the call started is seen by the
	// check before the rename.
	cancel()
	_, err = w.write(ctx, filepath.Join("d", "draft.md"), "new")
	require.ErrorIs(t, err, context.Canceled)
	b, err := os.ReadFile(filepath.Join(root, "d", "draft.md"))
	require.NoError(t, err)
	require.Equal(t, "old", string(b))
	requireNoTemp(t, filepath.Join(root, "d"))
}
