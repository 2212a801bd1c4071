package store_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/store"
)

// The same store opened under another name of its file (a symlink to it,
// or a relative path from a directory the process later leaves) finds the
// same owners: a pair the first open is still recording is not called
// interrupted by the second.
func TestRecoveryFindsALiveOwnerUnderAnotherNameOfTheFile(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	first, err := store.Open(ctx, path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = first.Close() })
	require.NoError(t, recordOwnedPair(ctx, first))

	link := filepath.Join(t.TempDir(), "link.db")
	require.NoError(t, os.Symlink(path, link))
	second, err := store.Open(ctx, link)
	require.NoError(t, err)
	t.Cleanup(func() { _ = second.Close() })
	require.True(t, second.Recovery().IsZero(), "recovered %+v of a live owner", second.Recovery())
	requireLive(t, second)
	requireLive(t, first)
}
