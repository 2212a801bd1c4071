package store_test

import (
	"context"
	"database/sql"
	"errors"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/store"
)

// storeFile makes a store with a recorded pair at a fresh path and closes
// it, so that the whole record is in the main file.
func storeFile(t *testing.T) string {
	t.Helper()
	path := dbPath(t)
	st, err := store.Open(context.Background(), path)
	require.NoError(t, err)
	runPair(t, st, "pair-1")
	require.NoError(t, st.Close())
	return path
}

// openBoth opens path writable and read-only; neither may panic, and each
// either succeeds or returns an error.
func openBoth(t *testing.T, path string) (rw, ro error) {
	t.Helper()
	ctx := context.Background()
	for i, cfg := range []store.Config{{Path: path}, {Path: path, ReadOnly: true}} {
		st, err := store.OpenConfig(ctx, cfg)
		if err == nil {
			require.NoError(t, st.Close())
		}
		if i == 0 {
			rw = err
		} else {
			ro = err
		}
	}
	return rw, ro
}

func TestNegativeSchemaVersionIsDamaged(t *testing.T) {
	for _, v := range []int{-5, -1, -2147483648} {
		path := storeFile(t)
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		_, err = db.Exec("PRAGMA user_version = " + itoa(v))
		require.NoError(t, err)
		require.NoError(t, db.Close())

		rw, ro := openBoth(t, path)
		for _, err := range []error{rw, ro} {
			require.ErrorIs(t, err, store.ErrDamaged, "version %d", v)
			require.Contains(t, err.Error(), "schema version "+itoa(v))
		}
	}
}

// TestDamagedHeaderIsATypedErrorNotAPanic writes random bytes over the
// header fields at offsets 50 to 61 (the auto-vacuum root, the text
// encoding and the schema version) of a real store file: every open either
// works or fails with a typed error.
func TestDamagedHeaderIsATypedErrorNotAPanic(t *testing.T) {
	clean := storeFile(t)
	orig, err := os.ReadFile(clean)
	require.NoError(t, err)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 64 {
		b := append([]byte(nil), orig...)
		for off := 50; off < 62; off++ {
			b[off] = byte(rng.UintN(256))
		}
		path := dbPath(t)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		rw, ro := openBoth(t, path)
		for _, err := range []error{rw, ro} {
			if err != nil && !errors.Is(err, store.ErrDamaged) && !errors.Is(err, store.ErrNotStore) &&
				!errors.As(err, new(*store.VersionError)) {
				t.Errorf("case %d: untyped error %v", i, err)
			}
		}
	}
}

func itoa(v int) string { return strconv.Itoa(v) }

// FuzzOpenDamagedHeader writes arbitrary bytes over the header of a real
// store file from offset 44 (schema format, cache size, auto-vacuum root,
// text encoding, schema version, incremental vacuum, application ID) and
// opens it both ways: no open may panic, and a failure is typed.
func FuzzOpenDamagedHeader(f *testing.F) {
	f.Add([]byte{}, uint8(16))
	f.Add([]byte{0xff, 0xff, 0xff, 0xfb}, uint8(16))             // user_version = -5
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0}, uint8(6))  // text encoding 9
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff}, uint8(0))              // schema format
	f.Add([]byte{0x12, 0x34, 0x56, 0x78, 0x9a, 0xbc}, uint8(24)) // application ID
	var clean []byte
	f.Fuzz(func(t *testing.T, patch []byte, at uint8) {
		if clean == nil {
			b, err := os.ReadFile(storeFile(t))
			require.NoError(t, err)
			clean = b
		}
		// The patch lands inside offsets 44 to 71 of the 100-byte header.
		const start, end = 44, 72
		off := start + int(at)%(end-start)
		b := append([]byte(nil), clean...)
		copy(b[off:end], patch)
		path := dbPath(t)
		require.NoError(t, os.WriteFile(path, b, 0o600))
		rw, ro := openBoth(t, path)
		for _, err := range []error{rw, ro} {
			if err != nil && !errors.Is(err, store.ErrDamaged) && !errors.Is(err, store.ErrNotStore) &&
				!errors.As(err, new(*store.VersionError)) {
				t.Fatalf("untyped error %v", err)
			}
		}
	})
}
