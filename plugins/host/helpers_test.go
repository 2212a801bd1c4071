package host

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func digestOf(t testing.TB, path string) string {
	t.Helper()
	d, err := Digest(path)
	require.NoError(t, err)
	return d
}

// config is a fixture config in mode with the test's bounds.
func config(t testing.TB, path, mode string) Config {
	cfg := Config{Path: path, SHA256: digestOf(t, path), StartupTimeout: 30 * time.Second}
	if mode != "" {
		cfg.Env = []string{"SPICE_FIXTURE_MODE=" + mode}
	}
	return cfg
}

// launch launches the fixture and closes it when the test ends, checking
// that no process of its group survives.
func launch(t testing.TB, cfg Config) *Plugin {
	t.Helper()
	p, err := Launch(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		requireGone(t, p.PID())
	})
	return p
}

// requireLaunchFails launches cfg, expects the failure kind and checks the
// launched process (found by its private directory) left nothing behind.
func requireLaunchFails(t *testing.T, cfg Config, kind error) *LaunchError {
	t.Helper()
	if cfg.SocketRoot == "" {
		// Other packages' tests launch plugins under the shared temporary
		// directory at the same time; counting there would see theirs. A
		// short name: t.TempDir's is too long for a Unix socket path.
		root, err := os.MkdirTemp("", "ph")
		require.NoError(t, err)
		t.Cleanup(func() { os.RemoveAll(root) })
		cfg.SocketRoot = root
	}
	before := countTempDirs(t, cfg.SocketRoot)
	p, err := Launch(context.Background(), cfg)
	require.Nil(t, p)
	require.ErrorIs(t, err, kind)
	var le *LaunchError
	require.ErrorAs(t, err, &le)
	require.Equal(t, before, countTempDirs(t, cfg.SocketRoot), "the private directory is removed")
	return le
}

func countTempDirs(t *testing.T, root string) int {
	if root == "" {
		root = os.TempDir()
	}
	es, err := os.ReadDir(root)
	require.NoError(t, err)
	n := 0
	for _, e := range es {
		if strings.HasPrefix(e.Name(), "spice-plugin-") {
			n++
		}
	}
	return n
}

// alive reports whether pid names a live process (a zombie is dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}

// requireGone checks that pid has ended. SIGKILL is delivered
// asynchronously; Close waits for the group, so this looks once.
func requireGone(t testing.TB, pid int) {
	t.Helper()
	require.False(t, alive(pid), "process %d survived", pid)
	err := syscall.Kill(pid, 0)
	if err == nil && !alive(pid) {
		return // a zombie whose new parent has not reaped it yet
	}
	require.True(t, errors.Is(err, syscall.ESRCH), "process %d: %v", pid, err)
}

func call(t testing.TB, callID, name, args string) tool.Call {
	t.Helper()
	c, err := tool.NewCall(id.Call(callID), name, []byte(args))
	require.NoError(t, err)
	return c
}

func dispatcher(t testing.TB, tools ...tool.Tool) *tool.Canonical {
	t.Helper()
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	require.NoError(t, err)
	return d
}

func execErr(t testing.TB, err error) *tool.ExecutionError {
	t.Helper()
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	return ee
}

type progress struct{ msgs chan string }

func (p progress) Report(_ context.Context, pr tool.Progress) error {
	select {
	case p.msgs <- pr.Message():
	default:
	}
	return nil
}

// groupMembers lists the live processes of process group pgid.
func groupMembers(t testing.TB, pgid int) []int {
	t.Helper()
	es, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range es {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		// After ") ": state ppid pgrp ...
		f := strings.Fields(string(b[i+1:]))
		if len(f) > 2 && f[0] != "Z" && f[2] == strconv.Itoa(pgid) {
			out = append(out, pid)
		}
	}
	return out
}
