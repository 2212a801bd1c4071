package host

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// interpreted writes a plugin made of a launcher, a library it sources
// from SPICE_PLUGIN_ROOT and a lock file, and returns its config.
func interpreted(t *testing.T) (Config, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "src")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "lib", "__pycache__"), 0o700))
	launcher := filepath.Join(dir, "launcher")
	require.NoError(t, os.WriteFile(launcher, []byte("#!/bin/sh\n. \"$SPICE_PLUGIN_ROOT/lib/plugin.sh\"\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(root, "lib", "plugin.sh"), []byte("echo 'library v1' >&2\nexit 4\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "lib", "__pycache__", "x.pyc"), []byte("ignored"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "requirements.txt"), []byte("grpcio==1.0 --hash=sha256:00\n"), 0o600))
	files := []string{"lib", "requirements.txt"}
	sum, err := DigestFiles(launcher, root, files)
	require.NoError(t, err)
	return Config{Path: launcher, SHA256: sum, Root: root, Files: files}, root
}

// A pin covers what runs: the launcher, the sources it loads and the lock
// file. Drift in any of them refuses the launch before anything runs; the
// plugin loads the verified copies, never the source tree.
func TestP1_PinCoversAnInterpretedPluginsFiles(t *testing.T) {
	cfg, root := interpreted(t)
	le := requireLaunchFails(t, cfg, ErrExited)
	require.Contains(t, strings.Join(le.Stderr, "\n"), "library v1", "the pinned library ran")

	// The library is edited behind the pin after the check: the copy runs.
	edited := cfg
	edited.afterVerify = func(string) {
		require.NoError(t, os.WriteFile(filepath.Join(root, "lib", "plugin.sh"), []byte("echo 'library v2' >&2\nexit 4\n"), 0o600))
	}
	le = requireLaunchFails(t, edited, ErrExited)
	require.Contains(t, strings.Join(le.Stderr, "\n"), "library v1", "the verified copy ran")

	for name, edit := range map[string]func(){
		"the library":   func() {}, // already edited above
		"the lock file": func() { appendTo(t, filepath.Join(root, "requirements.txt"), "six==1.0\n") },
		"a new file":    func() { appendTo(t, filepath.Join(root, "lib", "extra.sh"), "x\n") },
		"the launcher":  func() { appendTo(t, cfg.Path, "# more\n") },
	} {
		edit()
		le := requireLaunchFails(t, cfg, ErrDigest)
		require.Empty(t, le.Stderr, "%s drifted: nothing ran", name)
	}
	// A bytecode cache is not part of the pin: nothing copied loads it.
	cfg2, root2 := interpreted(t)
	appendTo(t, filepath.Join(root2, "lib", "__pycache__", "x.pyc"), "changed")
	requireLaunchFails(t, cfg2, ErrExited)
}

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestP1_FileSetMustStayInsideItsRoot(t *testing.T) {
	cfg, _ := interpreted(t)
	for _, files := range [][]string{{"../x"}, {"/etc/passwd"}, {"a/../../b"}, {""}, {"lib\nx"}} {
		c := cfg
		c.Files = files
		requireLaunchFails(t, c, ErrConfig)
	}
	c := cfg
	c.Root = "relative"
	requireLaunchFails(t, c, ErrConfig)
	// A symbolic link inside the set is refused.
	require.NoError(t, os.Symlink("/etc/passwd", filepath.Join(cfg.Root, "lib", "link")))
	requireLaunchFails(t, cfg, ErrNotExecutable)
}
