package host

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// racer rewrites path in place, alternating between two contents of the
// same size, until stop is called: a writer racing every launch's check.
func racer(t *testing.T, path string, a, b []byte) (stop func()) {
	t.Helper()
	require.Equal(t, len(a), len(b), "same-size bytes")
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			default:
			}
			f, err := os.OpenFile(path, os.O_WRONLY, 0)
			if err != nil {
				continue // ETXTBSY while the file runs
			}
			w := a
			if i%2 == 1 {
				w = b
			}
			_, _ = f.WriteAt(w, 0)
			f.Close()
		}
	}()
	return func() { close(done); wg.Wait() }
}

// A script's interpreter reads the file after the exec: a racing writer
// that puts its own same-size script in place must never get it run.
func TestP1_RacingWriterNeverRunsItsScript(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin")
	marker := filepath.Join(dir, "marker")
	evil := "#!/bin/sh\n: > " + marker + "\nexit 7\n"
	good := "#!/bin/sh\nexit 7\n"
	good += "#" + strings.Repeat("x", len(evil)-len(good)-2) + "\n"
	require.NoError(t, os.WriteFile(path, []byte(good), 0o755))
	cfg := config(t, path, "")
	stop := racer(t, path, []byte(evil), []byte(good))
	defer stop()
	for range 20 {
		_, err := Launch(t.Context(), cfg)
		require.Error(t, err)
		require.True(t, errors.Is(err, ErrExited) || errors.Is(err, ErrDigest), "%v", err)
		_, err = os.Stat(marker)
		require.True(t, errors.Is(err, os.ErrNotExist), "the racing writer's script ran")
	}
}

// The same for a native binary: a launch either runs the pinned build or
// is refused before anything runs; the other build never starts.
func TestP1_RacingWriterNeverRunsItsBinary(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "plugin")
	copyFile(t, fixtureV1, path)
	v1, err := os.ReadFile(fixtureV1)
	require.NoError(t, err)
	v2, err := os.ReadFile(fixtureV2)
	require.NoError(t, err)
	cfg := config(t, path, "announce")
	stop := racer(t, path, v2, v1)
	defer stop()
	ran := 0
	for range 20 {
		p, err := Launch(t.Context(), cfg)
		if err != nil {
			require.ErrorIs(t, err, ErrDigest)
			var le *LaunchError
			require.ErrorAs(t, err, &le)
			require.NotContains(t, strings.Join(le.Stderr, "\n"), "2.0.0", "the racing writer's build ran")
			continue
		}
		ran++
		require.Equal(t, "1.0.0", p.Manifest().Version)
		require.NotContains(t, strings.Join(p.Stderr(), "\n"), "2.0.0")
		require.NoError(t, p.Close())
		requireGone(t, p.PID())
	}
	t.Logf("%d of 20 launches ran the pinned build", ran)
}
