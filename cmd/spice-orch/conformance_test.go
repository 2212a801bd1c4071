//go:build unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/plugins/conformance"
)

// buildPlugin builds the Go package pkg (relative to the module) into a
// temporary directory and returns its path and digest.
func buildPlugin(t *testing.T, pkg string) (path, sum string) {
	t.Helper()
	path = filepath.Join(t.TempDir(), filepath.Base(pkg))
	goTool, err := exec.LookPath("go")
	require.NoError(t, err)
	out, err := exec.Command(goTool, "build", "-o", path, "../../"+pkg).CombinedOutput()
	require.NoError(t, err, string(out))
	r := spiceOrch(t, env(t), "plugin", "digest", path)
	require.Equal(t, 0, r.code, r.stderr)
	return path, strings.TrimSpace(r.stdout)
}

func TestP8_PluginConformanceCommand(t *testing.T) {
	t.Parallel()
	fixture, sum := buildPlugin(t, "plugins/fixtures/goplugin")
	r := spiceOrch(t, env(t), "plugin", "conformance", "--sha256", sum, fixture)
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 1+len(conformance.Names())+1, r.stdout)
	require.Equal(t, []string{"CASE", "RESULT", "TIME", "DETAIL"}, strings.Fields(lines[0]))
	for i, name := range conformance.Names() {
		f := strings.Fields(lines[1+i])
		require.Equal(t, []string{name, "pass"}, f[:2], lines[1+i])
	}
	require.Equal(t, fmt.Sprintf("conformance: %d passed, 0 failed", len(conformance.Names())), lines[len(lines)-1])

	// A plugin without the conformance profile fails, with exit code 1;
	// --case runs only the cases named.
	other, otherSum := buildPlugin(t, "plugins/examples/wordcount")
	r = spiceOrch(t, env(t), "plugin", "conformance", "--sha256", otherSum, "--case", "handshake/proof", "--case", "manifest", other)
	require.Equal(t, 1, r.code, r.stdout+r.stderr)
	require.Regexp(t, `(?m)^handshake/proof\s+pass\s`, r.stdout)
	require.Regexp(t, `(?m)^manifest\s+FAIL\s.*the tool profile's echo is missing`, r.stdout)
	require.Contains(t, r.stdout, "conformance: 1 passed, 1 failed")

	// Usage: exit code 2; a wrong pin is a failure said once.
	for _, args := range [][]string{
		{fixture},
		{"--sha256", sum, "goplugin"},
		{"--sha256", sum, "--case", "no-such-case", fixture},
		{"--sha256", sum},
	} {
		r = spiceOrch(t, env(t), append([]string{"plugin", "conformance"}, args...)...)
		require.Equalf(t, 2, r.code, "%v: %s", args, r.stderr)
	}
	r = spiceOrch(t, env(t), "plugin", "conformance", "--sha256", strings.Repeat("a", 64), fixture)
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "digest mismatch")
	require.Empty(t, r.stdout)
}

// plugin digest with --root and --file prints the pin of a launcher and
// the files it loads; an edit of one of them changes it.
func TestP1_PluginDigestCoversTheFilesALauncherLoads(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	launcher := filepath.Join(dir, "launcher")
	require.NoError(t, os.WriteFile(launcher, []byte("#!/bin/sh\n"), 0o755))
	root := filepath.Join(dir, "src")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pkg"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "m.py"), []byte("x = 1\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "requirements.txt"), []byte("six==1\n"), 0o600))
	digest := func() string {
		r := spiceOrch(t, env(t), "plugin", "digest", "--root", root, "--file", "pkg", "--file", "requirements.txt", launcher)
		require.Equal(t, 0, r.code, r.stderr)
		return strings.TrimSpace(r.stdout)
	}
	first := digest()
	r := spiceOrch(t, env(t), "plugin", "digest", launcher)
	require.NotEqual(t, first, strings.TrimSpace(r.stdout), "the files are part of the pin")
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "m.py"), []byte("x = 2\n"), 0o600))
	require.NotEqual(t, first, digest())
	r = spiceOrch(t, env(t), "plugin", "digest", "--root", root, "--file", "../x", launcher)
	require.Equal(t, 2, r.code, "a path out of the root is a usage error")
}
