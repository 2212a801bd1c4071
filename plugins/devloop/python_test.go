//go:build unix

package devloop

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/proctree"
)

// requirePythonFixture names the variable that `make test` sets when it has
// made the Python fixture's venv: with it, a missing venv fails the test.
const requirePythonFixture = "SPICE_REQUIRE_PYTHON_FIXTURE"

var skipNotice sync.Once

// pythonFiles are the fixture's files a pin covers.
var pythonFiles = []string{"gen", "requirements.txt", "spice_fixture"}

// pythonLauncher returns the Python fixture's launcher, made by `make
// test` (make plugins-venv), or skips with one line saying so.
func pythonLauncher(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	path := filepath.Join(root, ".venv-plugins/bin/spice-plugin-fixture-python")
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if os.Getenv(requirePythonFixture) == "1" {
			t.Fatalf("the Python fixture's venv (.venv-plugins) is missing, and %s=1 requires it", requirePythonFixture)
		}
		msg := "*** SKIPPING the Python plugin developer-loop tests: the Python fixture's venv (.venv-plugins) is missing; `make test` builds it and runs them ***"
		skipNotice.Do(func() { fmt.Fprintln(os.Stderr, msg) })
		t.Skip(msg)
	}
	return path
}

// pyDir copies the Python fixture's pinned files into a folder named
// pyplug under a new temporary folder, at version.
func pyDir(t *testing.T, version, mode string) string {
	t.Helper()
	src, err := filepath.Abs("../fixtures/python")
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), "pyplug")
	for _, f := range pythonFiles {
		if f == "requirements.txt" {
			b, err := os.ReadFile(filepath.Join(src, f))
			require.NoError(t, err)
			require.NoError(t, os.MkdirAll(dir, 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o644))
			continue
		}
		require.NoError(t, os.CopyFS(filepath.Join(dir, f), os.DirFS(filepath.Join(src, f))))
	}
	save(t, dir, "spice_fixture/service.py", serviceSource(t, version, mode))
	return dir
}

// pyBrokenLine is the line of spice_fixture/service.py that holds the
// plugin's version, which a broken source breaks.
const pyBrokenLine = 21

// Modes of serviceSource.
const (
	pyValid  = ""
	pyBroken = "+" // PLUGIN_VERSION = "..." + : a syntax error
)

// serviceSource is the fixture's service.py with its version, broken or
// not.
func serviceSource(t *testing.T, version, mode string) string {
	t.Helper()
	b, err := os.ReadFile("../fixtures/python/spice_fixture/service.py")
	require.NoError(t, err)
	lines := strings.Split(string(b), "\n")
	require.True(t, strings.HasPrefix(lines[pyBrokenLine-1], "PLUGIN_VERSION = "), "service.py moved its version")
	lines[pyBrokenLine-1] = strings.TrimSpace(`PLUGIN_VERSION = "` + version + `" ` + mode)
	return strings.Join(lines, "\n")
}

func startPython(t *testing.T, dir string, edit func(*Config)) *harness {
	t.Helper()
	launcher := pythonLauncher(t)
	return start(t, dir, func(c *Config) {
		c.Go, c.Python = "", &Python{Launcher: launcher, Files: pythonFiles}
		if edit != nil {
			edit(c)
		}
	})
}

// pyEdit saves service.py at version and waits until the loop saw it.
func (h *harness) pyEdit(t *testing.T, version, mode string) {
	t.Helper()
	save(t, h.dir, "spice_fixture/service.py", serviceSource(t, version, mode))
	if r := h.next(t, nil, Changed); r.File != "spice_fixture/service.py" {
		t.Fatalf("changed %q, want spice_fixture/service.py", r.File)
	}
}

func TestL1_PythonPinCoversLauncherSourcesAndLockFromTwoFolders(t *testing.T) {
	launcher := pythonLauncher(t)
	ctx := t.Context()
	out := t.TempDir()
	a, b := pyDir(t, "1.0.0", pyValid), pyDir(t, "1.0.0", pyValid)
	var builds []Build
	for _, dir := range []string{a, b} {
		bl, err := NewPythonBuilder(Python{Launcher: launcher, Files: pythonFiles}, dir, out)
		require.NoError(t, err)
		bd, err := bl.Build(ctx)
		require.NoError(t, err)
		builds = append(builds, bd)
	}
	require.Equal(t, builds[0], Build{Path: builds[1].Path, SHA256: builds[1].SHA256, Root: builds[1].Root, Files: builds[1].Files, Took: builds[0].Took},
		"the same launcher and files from %s and %s", a, b)
	bd := builds[0]
	require.Equal(t, filepath.Join(out, bd.SHA256, "exe"), bd.Path)
	require.Equal(t, filepath.Join(out, bd.SHA256, "root"), bd.Root)
	// The folder's name is the pin a spec gives: of the launcher and the
	// files, in the source folder and in the build alike.
	for _, set := range [][2]string{{launcher, a}, {bd.Path, bd.Root}} {
		got, err := host.DigestFiles(set[0], set[1], pythonFiles)
		require.NoError(t, err)
		require.Equal(t, bd.SHA256, got)
	}
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the build's folder, no temporary one")

	// An edit to a source or to the lock file is another pin.
	bl, err := NewPythonBuilder(Python{Launcher: launcher, Files: pythonFiles}, a, out)
	require.NoError(t, err)
	seen := map[string]bool{bd.SHA256: true}
	for _, edit := range []string{"spice_fixture/tools.py", "requirements.txt"} {
		f, err := os.OpenFile(filepath.Join(a, edit), os.O_WRONLY|os.O_APPEND, 0)
		require.NoError(t, err)
		_, err = f.WriteString("\n# an edit\n")
		require.NoError(t, err)
		require.NoError(t, f.Close())
		next, err := bl.Build(ctx)
		require.NoError(t, err, edit)
		require.False(t, seen[next.SHA256], "an edit of %s changes the pin", edit)
		seen[next.SHA256] = true
	}
}

func TestL3_APythonSyntaxErrorKeepsTheLastGoodAndSaysWhere(t *testing.T) {
	h := startPython(t, pyDir(t, "1.0.0", pyValid), nil)
	first := h.next(t, nil, Activated, Failed)
	require.Equal(t, Activated, first.Kind, first.String())
	require.Equal(t, "spice-fixture-python-g1", first.Active)
	require.Equal(t, "1.0.0", activeVersion(t, h))

	want := Diagnostic{File: "spice_fixture/service.py", Line: pyBrokenLine, Message: "invalid syntax"}
	for i := range 2 { // the same mistake saved twice reads the same
		h.pyEdit(t, "2.0.0", pyBroken)
		h.clock.fire()
		f := h.next(t, nil, Activated, Failed)
		require.Equal(t, Failed, f.Kind, f.String())
		require.Equal(t, StageBuild, f.Stage)
		require.Equal(t, []Diagnostic{want}, f.Diagnostics)
		require.Equal(t, fmt.Sprintf("pyplug-c%d failed (build); spice-fixture-python-g1 stays active\nspice_fixture/service.py:21: invalid syntax", i+2), f.String())
		requireLeaseOf(t, h.loop.Source(), "spice-fixture-python-g1")
	}
	require.Equal(t, "1.0.0", activeVersion(t, h))

	// A lock file with a requirement that no hash locks, beside the
	// syntax error still there: both are said.
	lock, err := os.ReadFile(filepath.Join(h.dir, "requirements.txt"))
	require.NoError(t, err)
	save(t, h.dir, "requirements.txt", string(lock)+"six==1.16.0\n")
	require.Equal(t, "requirements.txt", h.next(t, nil, Changed).File)
	h.clock.fire()
	f := h.next(t, nil, Activated, Failed)
	require.Equal(t, Failed, f.Kind, f.String())
	line := strings.Count(string(lock), "\n") + 1
	require.Equal(t, []Diagnostic{{File: "requirements.txt", Line: line, Message: `"six==1.16.0" has no --hash=sha256: the lock file is not hash-locked`}, want}, f.Diagnostics)
	save(t, h.dir, "requirements.txt", string(lock))
	require.Equal(t, "requirements.txt", h.next(t, nil, Changed).File)

	h.pyEdit(t, "2.0.0", pyValid)
	h.clock.fire()
	r := h.next(t, nil, Activated, Failed)
	require.Equal(t, Activated, r.Kind, r.String())
	require.Equal(t, "spice-fixture-python-g2", r.Active)
	require.Equal(t, "2.0.0", activeVersion(t, h))
}

func TestL2_APythonBurstBuildsOnceAndConvergesOnTheLastValidSource(t *testing.T) {
	h := startPython(t, pyDir(t, "1.0.0", pyValid), nil)
	require.Equal(t, Activated, h.next(t, nil, Activated, Failed).Kind)

	var seen []Report
	for i, v := range []string{"2.0.0", "2.0.1", "3.0.0", "3.0.1", "4.0.0"} {
		mode := pyValid
		if i%2 == 1 {
			mode = pyBroken
		}
		h.pyEdit(t, v, mode)
	}
	h.clock.fire()
	r := h.next(t, &seen, Activated, Failed, Discarded, Unchanged)
	require.Equal(t, Activated, r.Kind, r.String())
	require.Equal(t, 1, count(seen, Building), "one build for the burst")
	require.Equal(t, "4.0.0", activeVersion(t, h))
	want, err := host.DigestFiles(h.loop.cfg.Python.Launcher, h.dir, pythonFiles)
	require.NoError(t, err)
	require.Equal(t, want, r.SHA256, "the active build is the last source's")

	seen = nil
	h.pyEdit(t, "5.0.0", pyValid)
	h.pyEdit(t, "5.0.1", pyBroken)
	h.clock.fire()
	f := h.next(t, &seen, Activated, Failed, Discarded, Unchanged)
	require.Equal(t, Failed, f.Kind, f.String())
	require.Equal(t, 1, count(seen, Building))
	require.Equal(t, r.Active, f.Active)
	require.Equal(t, "4.0.0", activeVersion(t, h))
}

func TestL4_ASupersededPythonGenerationEndsByPID(t *testing.T) {
	// Each generation starts, before its handshake, a process in a
	// session of its own: a tree that outlives its process group.
	h := startEnded(t, startPython, pyDir(t, "1.0.0", pyValid), "SPICE_FIXTURE_MISBEHAVE=setsid-grandchild")
	lease := requireLeaseOf(t, h.loop.Source(), "spice-fixture-python-g1")
	tree := h.tree(t, lease, "descendant")

	h.pyEdit(t, "2.0.0", pyValid)
	h.clock.fire()
	r := h.next(t, nil, Activated, Failed)
	require.Equal(t, Activated, r.Kind, r.String())
	require.Equal(t, "spice-fixture-python-g2", r.Active)
	require.NotEmpty(t, proctree.Live(tree), "the leased generation still serves")
	require.NoError(t, lease.Release(t.Context()))
	h.requireDrained(t, "spice-fixture-python-g1")
	require.Empty(t, proctree.Live(tree), "every process of the superseded generation is gone")
}
