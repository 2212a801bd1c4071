//go:build unix

package conformance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/proctree"
)

// script writes an executable shell script and returns a launcher pinned
// to it.
func script(t *testing.T, body string) ProcessLauncher {
	t.Helper()
	path := filepath.Join(t.TempDir(), "plugin.sh")
	b := []byte("#!/bin/sh\n" + body)
	require.NoError(t, os.WriteFile(path, b, 0o700))
	sum := sha256.Sum256(b)
	return ProcessLauncher{Path: path, SHA256: hex.EncodeToString(sum[:]), StartTimeout: 5 * time.Second, StopGrace: time.Second}
}

func requireGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		// Exited but not reaped (its parent is gone): a zombie is dead.
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		require.NoError(t, err)
		state := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))[0]
		require.Equalf(t, "Z", state, "process %d survived", pid)
	}
}

func TestP8_LauncherRefusesARelativePathAndAWrongDigest(t *testing.T) {
	l := script(t, "exit 0\n")
	_, err := ProcessLauncher{Path: "plugin.sh", SHA256: l.SHA256}.Launch(context.Background(), LaunchConfig{})
	require.ErrorIs(t, err, ErrPath)
	l.SHA256 = strings.Repeat("0", 64)
	_, err = l.Launch(context.Background(), LaunchConfig{})
	require.ErrorIs(t, err, ErrDigest)
}

func TestP8_LauncherReportsAnExitBeforeTheHandshake(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	l := script(t, "echo $$ > "+pidFile+"\necho starting >&2\necho 'no common protocol version' >&2\nexit 3\n")
	_, err := l.Launch(context.Background(), LaunchConfig{})
	require.ErrorIs(t, err, ErrExited)
	require.ErrorContains(t, err, `(exit status 3): "no common protocol version"`, "the plugin's last log line says why")
	requireGone(t, pidFile)
}

func TestP8_LauncherBoundsASilentStartAndKillsItsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// The plugin and a background descendant both wait for ever.
	l := script(t, "sleep 300 &\necho $! > "+pidFile+"\nexec sleep 300\n")
	l.StartTimeout = 300 * time.Millisecond
	_, err := l.Launch(context.Background(), LaunchConfig{})
	require.ErrorIs(t, err, ErrStartTimeout)
	requireGone(t, pidFile)
}

func TestP8_LauncherRefusesALineOverTheByteBound(t *testing.T) {
	l := script(t, "head -c 2000 /dev/zero | tr '\\0' x\nexec sleep 300\n")
	_, err := l.Launch(context.Background(), LaunchConfig{})
	require.ErrorIs(t, err, ErrHandshake)
}

func TestP8_LauncherCloseEndsTheWholeProcessGroup(t *testing.T) {
	// The fixture leaves a descendant behind in its group.
	l := pythonFixture(t, "SPICE_FIXTURE_MISBEHAVE=grandchild,ignore-shutdown")
	l.StopGrace = 200 * time.Millisecond
	tg, err := l.Launch(context.Background(), LaunchConfig{})
	require.NoError(t, err)
	pid := tg.PID()
	require.Error(t, groupGone(pid), "the group runs before Close")
	require.NoError(t, tg.Close())
	require.NoError(t, groupGone(pid))
	require.NoError(t, tg.Close(), "Close is idempotent")
}

func TestP8_RunRefusesABadConfig(t *testing.T) {
	_, err := Run(context.Background(), Config{})
	require.Error(t, err)
	_, err = Run(context.Background(), Config{Launcher: script(t, "exit 0\n"), Only: []string{"no-such-case"}})
	require.True(t, errors.Is(err, ErrUnknownCase))
}

func TestP8_WriteTableEndsWithTheCountLine(t *testing.T) {
	var b strings.Builder
	require.NoError(t, WriteTable(&b, []Result{
		{Case: "echo", Passed: true, Elapsed: 3 * time.Millisecond},
		{Case: "cancel", Detail: "1 slow calls\nstill run", Elapsed: time.Second},
	}))
	require.Equal(t, ""+
		"CASE    RESULT  TIME  DETAIL\n"+
		"echo    pass    3ms   \n"+
		"cancel  FAIL    1s    1 slow calls still run\n"+
		"conformance: 1 passed, 1 failed\n", b.String())
	require.False(t, Passed(nil))
}

func TestP8_LauncherCloseEndsADescendantInItsOwnSession(t *testing.T) {
	// The fixture's descendant called setsid and holds stdout and stderr.
	l := goLauncher(t, "SPICE_FIXTURE_MODE=setsid_grandchild")
	l.StopGrace = 200 * time.Millisecond
	tg, err := l.Launch(context.Background(), LaunchConfig{})
	require.NoError(t, err)
	tree := proctree.Descendants(tg.PID())
	require.Len(t, tree, 1)
	closed := make(chan struct{})
	go func() {
		tg.Close()
		close(closed)
	}()
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	select {
	case <-closed:
	case <-bound.C:
		t.Fatal("Close did not return within its bound")
	}
	require.False(t, proctree.Alive(tree[0]), "process %d survived", tree[0].PID)
}
