package pin

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

func sum(b string) string {
	s := sha256.Sum256([]byte(b))
	return hex.EncodeToString(s[:])
}

func TestP1_DigestIsTheExecutablesOrTheListings(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "launcher")
	require.NoError(t, os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755))
	d, err := Digest(Set{Exe: exe}, 1<<20)
	require.NoError(t, err)
	require.Equal(t, sum("#!/bin/sh\n"), d, "without files: the executable's SHA-256")

	root := filepath.Join(dir, "src")
	require.NoError(t, os.MkdirAll(filepath.Join(root, "pkg", "__pycache__"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "b.py"), []byte("b"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "pkg", "__pycache__", "b.pyc"), []byte("c"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(root, "lock.txt"), []byte("l"), 0o600))
	d, err = Digest(Set{Exe: exe, Root: root, Files: []string{"pkg", "lock.txt"}}, 1<<20)
	require.NoError(t, err)
	want := "spice-plugin-files v1\nexe " + sum("#!/bin/sh\n") + "\nfile " + sum("l") + " lock.txt\nfile " + sum("b") + " pkg/b.py\n"
	require.Equal(t, sum(want), d)

	// The copy verifies against the same pin, and a mismatch says so.
	out := t.TempDir()
	c, err := Copy(out, Set{Exe: exe, Root: root, Files: []string{"pkg", "lock.txt"}}, d, 1<<20)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(c.Root, "pkg", "b.py"))
	require.NoError(t, err)
	require.Equal(t, "b", string(b))
	_, err = Copy(t.TempDir(), Set{Exe: exe}, d, 1<<20)
	require.ErrorIs(t, err, ErrMismatch)
	_, err = Copy(t.TempDir(), Set{Exe: exe, Root: root, Files: []string{"pkg"}}, d, 3)
	require.ErrorIs(t, err, ErrTooLarge)
}

func TestP1_FIFOAndLinksRefusedWithoutBlocking(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o755))
	_, err := Digest(Set{Exe: fifo}, 1<<20)
	require.ErrorIs(t, err, ErrNotExecutable)
	exe := filepath.Join(dir, "exe")
	require.NoError(t, os.WriteFile(exe, []byte("x"), 0o755))
	_, err = Digest(Set{Exe: exe, Root: dir, Files: []string{"fifo"}}, 1<<20)
	require.ErrorIs(t, err, ErrNotRegular)
	require.NoError(t, os.Symlink(exe, filepath.Join(dir, "link")))
	_, err = Digest(Set{Exe: exe, Root: dir, Files: []string{"link"}}, 1<<20)
	require.ErrorIs(t, err, ErrNotRegular)
}

func FuzzValidate(f *testing.F) {
	for _, s := range []string{"pkg", "a/b", "../x", "/etc", "a/../b", "", ".", "a\nb", "a\\b"} {
		f.Add("/root", s)
	}
	f.Fuzz(func(t *testing.T, root, file string) {
		err := (Set{Exe: "/bin/x", Root: root, Files: []string{file}}).Validate()
		if err != nil {
			require.True(t, errors.Is(err, ErrSet))
			return
		}
		// An accepted path stays under the root and holds no line break.
		rel, err := filepath.Rel(root, filepath.Join(root, file))
		require.NoError(t, err)
		require.False(t, rel == ".." || strings.HasPrefix(rel, "../") || strings.ContainsAny(file, "\n\r"), "%q", file)
	})
}
