//go:build unix

package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var pythonSkipNotice sync.Once

// pythonPluginDir copies the Python fixture's packages and lock file into
// a folder of their own and returns it with the fixture's launcher, made
// by `make test` (make plugins-venv); without that venv it skips, saying
// so in one line.
func pythonPluginDir(t *testing.T) (dir, launcher string) {
	t.Helper()
	root, err := filepath.Abs("../../../..")
	require.NoError(t, err)
	launcher = filepath.Join(root, ".venv-plugins/bin/spice-plugin-fixture-python")
	if _, err := os.Stat(launcher); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv("SPICE_REQUIRE_PYTHON_FIXTURE") == "1" {
			t.Fatal("the Python fixture's venv (.venv-plugins) is missing, and SPICE_REQUIRE_PYTHON_FIXTURE=1 requires it")
		}
		msg := "*** SKIPPING the Python `plugin dev` tests: the Python fixture's venv (.venv-plugins) is missing; `make test` builds it and runs them ***"
		pythonSkipNotice.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		t.Skip(msg)
	}
	src := filepath.Join(root, "plugins/fixtures/python")
	dir = filepath.Join(t.TempDir(), "pyplug")
	for _, f := range []string{"gen", "spice_fixture"} {
		require.NoError(t, os.CopyFS(filepath.Join(dir, f), os.DirFS(filepath.Join(src, f))))
	}
	b, err := os.ReadFile(filepath.Join(src, "requirements.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "requirements.txt"), b, 0o644))
	return dir, launcher
}

// echoPair is a relay whose writer calls the Python fixture's echo.
const echoPair = `version: 1
name: python-dev
pattern: relay
approve: never
plugins:
  - path: /placeholder/launcher
    sha256: "0000000000000000000000000000000000000000000000000000000000000000"
    root: /placeholder/root
    files: [gen, requirements.txt, spice_fixture]
workers:
  - role: writer
    provider: scripted
    script:
      - calls:
          - name: echo
            arguments: {text: "from the dev build"}
      - text: echoed
  - role: reviewer
    provider: scripted
    script:
      - text: ok
`

// TestL3_PluginDevBuildsAPythonPluginPlaysItAndNamesTheMistakesLine: `plugin
// dev --launcher` over a Python plugin's folder activates it, pins the
// build (launcher, root and files) into --run's spec and plays it, and a
// syntax error keeps that generation with the error's FILE:LINE.
func TestL3_PluginDevBuildsAPythonPluginPlaysItAndNamesTheMistakesLine(t *testing.T) {
	dir, launcher := pythonPluginDir(t)
	spec := filepath.Join(t.TempDir(), "python-pair.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(echoPair), 0o644))
	builds := filepath.Join(t.TempDir(), "builds")
	out := &lines{grew: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(ctx, []string{"plugin", "dev", "--launcher", launcher, "--out", builds, "--debounce", "50ms",
			"--run", spec, "--no-store", dir}, Env{Stdout: out, Stderr: out, Getenv: func(string) string { return "" }})
	}()
	defer func() {
		cancel()
		require.Equal(t, 0, <-done, out.String())
	}()

	out.await(t, "pyplug-c1: sha256 ")
	out.await(t, " active as spice-fixture-python-g1 (build ")
	out.await(t, "pair completed: ")
	pinned, err := os.ReadFile(spec)
	require.NoError(t, err)
	require.Contains(t, string(pinned), "path: "+builds+"/")
	require.Contains(t, string(pinned), "root: "+builds+"/")
	require.NotContains(t, string(pinned), "placeholder")

	b, err := os.ReadFile(filepath.Join(dir, "spice_fixture/tools.py"))
	require.NoError(t, err)
	bad := strings.Replace(string(b), "def echo(call: Call)", "def echo(call: Call", 1)
	require.NotEqual(t, string(b), bad)
	tmp := filepath.Join(dir, "spice_fixture", ".tools.py.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(bad), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "spice_fixture/tools.py")))
	out.await(t, "pyplug-c2 failed (build); spice-fixture-python-g1 stays active\nspice_fixture/tools.py:112: invalid syntax\n")
}
