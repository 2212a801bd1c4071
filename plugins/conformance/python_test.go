//go:build unix

package conformance

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/plugins/internal/pin"
)

// requirePythonFixture names the variable that `make test` sets when it has
// made the Python fixture's venv: with it, a missing fixture fails the test
// instead of skipping it, so CI cannot pass without the Python run.
const requirePythonFixture = "SPICE_REQUIRE_PYTHON_FIXTURE"

// skipNotice prints the skip on stderr once per test binary, where plain
// `go test` shows it; every skipping test still says why in -v.
var skipNotice sync.Once

// pythonFixture returns a launcher of the Python fixture, made by
// `make plugins-venv`. Without SPICE_REQUIRE_PYTHON_FIXTURE=1 it skips,
// loudly, when no Python 3.12 exists or the venv was never made, so that
// `go test ./...` on a fresh clone passes with Go alone.
func pythonFixture(t *testing.T, env ...string) ProcessLauncher {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	required := os.Getenv(requirePythonFixture) == "1"
	skip := func(msg string) {
		t.Helper()
		if required {
			t.Fatalf("%s, and %s=1 requires it", msg, requirePythonFixture)
		}
		msg = "*** SKIPPING the Python plugin conformance run: " + msg + "; `make test` builds it and runs it ***"
		skipNotice.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		t.Skip(msg)
	}
	py, err := exec.Command(filepath.Join(root, "plugins/fixtures/python/find-python3.12")).Output()
	require.NoError(t, err)
	if strings.TrimSpace(string(py)) == "" {
		skip("python3.12 not found")
	}
	path := filepath.Join(root, ".venv-plugins/bin/spice-plugin-fixture-python")
	_, err = os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		skip("the Python fixture's venv (.venv-plugins) is missing")
	}
	require.NoError(t, err)
	set := pythonFiles(root, path)
	sum, err := pin.Digest(set, maxExecutableBytes)
	require.NoError(t, err)
	return ProcessLauncher{Path: path, SHA256: sum, Root: set.Root, Files: set.Files, Env: env}
}

// pythonFiles is what a pin of the Python fixture covers: its launcher,
// its sources, the generated protocol code and the dependency lock file.
func pythonFiles(root, launcher string) pin.Set {
	return pin.Set{Exe: launcher, Root: filepath.Join(root, "plugins/fixtures/python"),
		Files: []string{"gen", "requirements.txt", "spice_fixture"}}
}

func runSuite(t *testing.T, l Launcher, only ...string) []Result {
	t.Helper()
	return runSuiteWith(t, Config{Launcher: l, Only: only})
}

func runSuiteWith(t *testing.T, cfg Config) []Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs, err := Run(ctx, cfg)
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, WriteTable(&b, rs))
	t.Log("\n" + b.String())
	return rs
}

func TestP8_PythonFixturePassesTheWholeSuite(t *testing.T) {
	start := time.Now()
	rs := runSuite(t, pythonFixture(t))
	t.Logf("the Python conformance run took %v", time.Since(start).Round(time.Millisecond))
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = r.Case
		require.Truef(t, r.Passed, "%s: %s", r.Case, r.Detail)
	}
	require.Equal(t, Names(), names, "every case ran, in the suite's order")
	require.True(t, Passed(rs))
}

// The Python fixture's pin covers its modules and its lock file, not only
// its launcher: an edit behind the launcher refuses the launch.
func TestP1_PythonFixturePinCoversItsModulesAndLockFile(t *testing.T) {
	base := pythonFixture(t)
	src := t.TempDir()
	require.NoError(t, os.CopyFS(src, os.DirFS(base.Root)))
	for _, edit := range []string{"spice_fixture/tools.py", "requirements.txt", "gen/spiceorch/plugin/v1/plugin_pb2.py"} {
		t.Run(edit, func(t *testing.T) {
			root := filepath.Join(t.TempDir(), "src")
			require.NoError(t, os.CopyFS(root, os.DirFS(src)))
			l := base
			l.Root = root
			sum, err := pin.Digest(pin.Set{Exe: l.Path, Root: root, Files: l.Files}, maxExecutableBytes)
			require.NoError(t, err)
			require.Equal(t, base.SHA256, sum, "the same files, elsewhere, have the same pin")
			tg, err := l.Launch(context.Background(), LaunchConfig{})
			require.NoError(t, err)
			require.NoError(t, tg.Close())
			f, err := os.OpenFile(filepath.Join(root, edit), os.O_WRONLY|os.O_APPEND, 0)
			require.NoError(t, err)
			_, err = f.WriteString("\n# edited behind the pin\n")
			require.NoError(t, err)
			require.NoError(t, f.Close())
			_, err = l.Launch(context.Background(), LaunchConfig{})
			require.ErrorIs(t, err, ErrDigest)
		})
	}
}
