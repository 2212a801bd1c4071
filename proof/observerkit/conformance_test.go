package observerkit_test

import (
	"bytes"
	"context"
	"database/sql"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/proof/observerkit"
	"github.com/spice-orch/spice-orch/store"
)

// The project's SQLite store passes the kit it offers third parties.

func recorded(st *store.Store) observerkit.Recorded {
	return func(ctx context.Context, log string) ([][]byte, error) {
		var buf bytes.Buffer
		if err := st.ReplayJSON(ctx, &buf, log); err != nil {
			return nil, err
		}
		var out [][]byte
		for l := range bytes.Lines(buf.Bytes()) {
			out = append(out, bytes.TrimSuffix(l, []byte("\n")))
		}
		return out, nil
	}
}

func openStore(t *testing.T, cfg store.Config) *store.Store {
	t.Helper()
	st, err := store.OpenConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

func TestStoreConforms(t *testing.T) {
	observerkit.Run(t, observerkit.Config{
		New: func(t *testing.T) (eventlog.Observer, observerkit.Recorded) {
			st := openStore(t, store.Config{Path: filepath.Join(t.TempDir(), "spice.db")})
			return st, recorded(st)
		},
		// Another process holds the database's write lock.
		Blocked: func(t *testing.T) (eventlog.Observer, observerkit.Recorded, func()) {
			path := filepath.Join(t.TempDir(), "spice.db")
			st := openStore(t, store.Config{Path: path, BusyTimeout: time.Minute})
			ctx := context.Background()
			other, err := sql.Open("sqlite", path)
			require.NoError(t, err)
			lock, err := other.Conn(ctx)
			require.NoError(t, err)
			_, err = lock.ExecContext(ctx, "BEGIN IMMEDIATE")
			require.NoError(t, err)
			var once sync.Once
			release := func() {
				once.Do(func() {
					_, err := lock.ExecContext(ctx, "ROLLBACK")
					require.NoError(t, err)
					require.NoError(t, lock.Close())
					require.NoError(t, other.Close())
				})
			}
			t.Cleanup(release) // before the store closes: cleanups run last first
			return st, recorded(st), release
		},
		// A store opened read-only refuses every write.
		Refusing: func(t *testing.T) eventlog.Observer {
			path := filepath.Join(t.TempDir(), "spice.db")
			st, err := store.Open(context.Background(), path)
			require.NoError(t, err)
			require.NoError(t, st.Close())
			return openStore(t, store.Config{Path: path, ReadOnly: true})
		},
	})
}
