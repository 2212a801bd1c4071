//go:build linux

package store_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/store"
)

// readOnlyDir makes dir read-only to this process until the test ends: a
// read-only bind mount over it when the test runs as root (whom file
// modes do not stop), else its mode. It skips the test where neither
// works.
func readOnlyDir(t *testing.T, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		require.NoError(t, os.Chmod(dir, 0o555))
		t.Cleanup(func() { _ = os.Chmod(dir, 0o755) })
		return
	}
	if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount %s: %v", dir, err)
	}
	t.Cleanup(func() { require.NoError(t, syscall.Unmount(dir, syscall.MNT_DETACH)) })
	require.NoError(t, syscall.Mount("", dir, "", syscall.MS_REMOUNT|syscall.MS_BIND|syscall.MS_RDONLY, ""))
	require.ErrorIs(t, os.WriteFile(filepath.Join(dir, "probe"), nil, 0o600), syscall.EROFS)
}

// A WAL store closed cleanly and left on a read-only location opens
// read-only and reads in full, though SQLite cannot create its
// shared-memory file there: reading must work wherever recovery cannot
// write.
func TestReadOnlyOpenReadsAStoreOnAReadOnlyLocation(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "spice.db")
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	appendAll(t, newLog(t, "run-1", st),
		event.RunStarted{RunID: "run-1", PlanID: "plan-1", PlanFingerprint: "ab"},
		event.TurnStarted{RunID: "run-1", TurnID: "turn-1", Index: 1},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-1", CallID: "c1", Name: "write", Effect: "mutating", Replay: "unsafe"},
	)
	require.NoError(t, st.Close())
	readOnlyDir(t, dir)

	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	run, err := ro.Run(ctx, "run-1")
	require.NoError(t, err)
	require.Len(t, run.Events, 3)
	require.Equal(t, store.StatusInterrupted, run.Summary.Status, "its owner is gone, though nothing was marked")
	require.Equal(t, 1, run.Summary.Turns, "what the run recorded counts")
	require.Len(t, run.Uncertain, 1)

	_, err = store.Open(ctx, path)
	require.Error(t, err, "a writable open cannot work there")
}
