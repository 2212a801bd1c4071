package host

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// within runs f and fails the test unless it returns within d.
func within(t *testing.T, d time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		t.Fatalf("%s did not return within %v", what, d)
	}
}

// A FIFO named as the plugin is refused at once: nothing waits for a
// writer to open it.
func TestP5_FIFOPathIsRefusedAtOnce(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "plugin")
	require.NoError(t, syscall.Mkfifo(fifo, 0o755))
	var err error
	within(t, 5*time.Second, "Digest", func() { _, err = Digest(fifo) })
	require.ErrorIs(t, err, ErrNotExecutable)
	cfg := Config{Path: fifo, SHA256: strings.Repeat("a", 64), StartupTimeout: 2 * time.Second}
	within(t, 5*time.Second, "Launch", func() { requireLaunchFails(t, cfg, ErrNotExecutable) })
}

// A plugin that exits right after its handshake line is reported exited
// at once, not timed out at the end of the startup bound.
func TestP5_ExitAfterTheHandshakeIsReportedExited(t *testing.T) {
	cfg := config(t, fixtureV1, "exit_after_line")
	cfg.StartupTimeout = 20 * time.Second
	within(t, 10*time.Second, "Launch", func() { requireLaunchFails(t, cfg, ErrExited) })
}

// A handshake naming a socket outside the launch's private directory is
// refused, and leaves no process and no private directory.
func TestP2_SocketOutsideThePrivateDirectoryRefused(t *testing.T) {
	outside, err := os.MkdirTemp("", "po")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(outside) })
	cfg := config(t, fixtureV1, "socket_outside")
	cfg.Env = append(cfg.Env, "SPICE_FIXTURE_SOCKET_DIR="+outside)
	le := requireLaunchFails(t, cfg, ErrHandshake)
	require.Contains(t, le.Error(), "not in the private directory")
	requireNoFixtureLeft(t, outside)
}

// A temporary directory too long for a Unix socket path inside it makes
// the launch fall back to a short private directory.
func TestP5_LongTempDirFallsBackToAShortPrivateDirectory(t *testing.T) {
	long := filepath.Join(t.TempDir(), strings.Repeat("d", 80))
	require.NoError(t, os.Mkdir(long, 0o700))
	t.Setenv("TMPDIR", long)
	p, err := Launch(t.Context(), config(t, fixtureV1, ""))
	require.NoError(t, err)
	dir := p.dir
	require.False(t, strings.HasPrefix(dir, long))
	st, err := os.Stat(dir)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), st.Mode().Perm(), "private")
	require.NoError(t, p.Close())
	requireGone(t, p.PID())
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist)
	// A configured socket_root that is too long stays an error.
	cfg := config(t, fixtureV1, "")
	cfg.SocketRoot = long
	_, err = Launch(t.Context(), cfg)
	require.ErrorIs(t, err, ErrConfig)
}

// requireNoFixtureLeft checks that no live process has outside in its
// environment: the launched fixture is gone.
func requireNoFixtureLeft(t *testing.T, outside string) {
	t.Helper()
	es, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err == nil && strings.Contains(string(b), "SPICE_FIXTURE_SOCKET_DIR="+outside+"\x00") {
			require.False(t, alive(pid), "the plugin process %d survived", pid)
		}
	}
}
