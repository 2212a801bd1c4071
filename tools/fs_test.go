package tools_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/tools"
)

func TestFSRead_ReadsFilesInsideTheWorkspace(t *testing.T) {
	e := newEnv(t)
	e.write(t, "draft.md", "# Title\n")
	e.write(t, "notes/deep/a.txt", "héllo")
	e.write(t, "empty.txt", "")
	require.Equal(t, "# Title\n", e.ok(t, "fs.read", args("path", "draft.md")))
	require.Equal(t, "héllo", e.ok(t, "fs.read", args("path", "notes/deep/a.txt")))
	require.Equal(t, "héllo", e.ok(t, "fs.read", args("path", "./notes/x/../deep/a.txt")))
	require.Equal(t, "", e.ok(t, "fs.read", args("path", "empty.txt")))

	// Links that stay inside the workspace are followed.
	require.NoError(t, os.Symlink("draft.md", filepath.Join(e.root, "link.md")))
	require.NoError(t, os.Symlink(filepath.Join(e.root, "notes"), filepath.Join(e.root, "notes-link")))
	require.Equal(t, "# Title\n", e.ok(t, "fs.read", args("path", "link.md")))
	require.Equal(t, "héllo", e.ok(t, "fs.read", args("path", "notes-link/deep/a.txt")))
}

func TestFSRead_ProblemsTheModelCanFix(t *testing.T) {
	e := newEnv(t)
	e.write(t, "dir/f.txt", "x")
	require.NoError(t, os.WriteFile(filepath.Join(e.root, "bin"), []byte{0xff, 0xfe, 0}, 0o644))
	cases := []struct{ code, path string }{
		{tools.CodeNotFound, "missing.md"},
		{tools.CodeNotFound, "nodir/missing.md"},
		{tools.CodeNotAFile, "dir"},
		{tools.CodeNotAFile, "."},
		{tools.CodeNotAFile, "dir/.."},
		{tools.CodeNotADirectory, "dir/f.txt/x"},
		{tools.CodeNotText, "bin"},
		{tools.CodeInvalidArguments, ""},
		{tools.CodeInvalidArguments, strings.Repeat("a", tools.MaxPathBytes+1)},
		{tools.CodeInvalidArguments, "a\x00b"},
	}
	for _, c := range cases {
		t.Run(c.path, func(t *testing.T) { e.problem(t, c.code, "fs.read", args("path", c.path)) })
	}
}

func TestConfinement_EscapesAreRefused(t *testing.T) {
	e := newEnv(t)
	e.write(t, "inside.txt", "in")
	secret := filepath.Join(e.outside, "secret.txt")
	require.NoError(t, os.Symlink(secret, filepath.Join(e.root, "file-link")))
	require.NoError(t, os.Symlink(e.outside, filepath.Join(e.root, "dir-link")))
	require.NoError(t, os.Symlink(filepath.Join(e.outside, "new.txt"), filepath.Join(e.root, "dangling-link")))
	require.NoError(t, os.Symlink("../outside/secret.txt", filepath.Join(e.root, "relative-link")))
	require.NoError(t, os.MkdirAll(filepath.Join(e.root, "sub"), 0o755))
	require.NoError(t, os.Symlink("../../outside", filepath.Join(e.root, "sub", "up-link")))

	refused := []struct{ path, readCode, writeCode string }{
		{"../outside/secret.txt", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"a/../../outside/secret.txt", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"..", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{secret, tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{filepath.Join(e.root, "inside.txt"), tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"file-link", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"relative-link", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"dir-link/secret.txt", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"dir-link/new.txt", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"dir-link/sub/new.txt", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"sub/up-link/secret.txt", tools.CodeOutsideWorkspace, tools.CodeOutsideWorkspace},
		{"dangling-link", tools.CodeNotFound, tools.CodeNotFound},
	}
	for _, c := range refused {
		t.Run(c.path, func(t *testing.T) {
			e.problem(t, c.readCode, "fs.read", args("path", c.path))
			e.problem(t, c.writeCode, "fs.write", args("path", c.path, "content", "pwned"))
			e.requireUntouched(t)
		})
	}
	require.Equal(t, "in", e.read(t, "inside.txt"))
	e.requireNoTemp(t)
}

// A hard link inside the workspace to a file outside it has no target to
// resolve: fs.read refuses any file with more than one link, and fs.write
// replaces the workspace name without touching the outside file.
func TestConfinement_HardLinksAreNotFollowed(t *testing.T) {
	e := newEnv(t)
	secret := filepath.Join(e.outside, "secret.txt")
	if err := os.Link(secret, filepath.Join(e.root, "hard.txt")); err != nil {
		t.Skipf("hard links unsupported here: %v", err)
	}
	e.problem(t, tools.CodeOutsideWorkspace, "fs.read", args("path", "hard.txt"))

	e.ok(t, "fs.write", args("path", "hard.txt", "content", "replaced"))
	require.Equal(t, "replaced", e.read(t, "hard.txt"))
	got, err := os.ReadFile(secret)
	require.NoError(t, err)
	require.Equal(t, "outside secret", string(got), "the outside file is untouched")
	e.requireNoTemp(t)
}

func TestFSWrite_WritesWholeFilesAtomically(t *testing.T) {
	e := newEnv(t)
	require.JSONEq(t, `{"path":"draft.md","bytes":6}`, e.ok(t, "fs.write", args("path", "draft.md", "content", "first\n")))
	require.Equal(t, "first\n", e.read(t, "draft.md"))

	// Replacing keeps the file's permissions and leaves no temporary file.
	require.NoError(t, os.Chmod(filepath.Join(e.root, "draft.md"), 0o600))
	e.ok(t, "fs.write", args("path", "./draft.md", "content", "second"))
	require.Equal(t, "second", e.read(t, "draft.md"))
	fi, err := os.Stat(filepath.Join(e.root, "draft.md"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())

	// Missing directories are created inside the workspace.
	require.JSONEq(t, `{"path":"a/b/c.txt","bytes":0}`, e.ok(t, "fs.write", args("path", "a/b/c.txt", "content", "")))
	require.Equal(t, "", e.read(t, "a/b/c.txt"))

	// Through a link that stays inside, the link's target is written.
	require.NoError(t, os.Symlink("draft.md", filepath.Join(e.root, "link.md")))
	e.ok(t, "fs.write", args("path", "link.md", "content", "third"))
	require.Equal(t, "third", e.read(t, "draft.md"))
	target, err := os.Readlink(filepath.Join(e.root, "link.md"))
	require.NoError(t, err)
	require.Equal(t, "draft.md", target)

	// Writing the same content twice leaves the same file (Idempotent).
	e.ok(t, "fs.write", args("path", "draft.md", "content", "third"))
	require.Equal(t, "third", e.read(t, "draft.md"))
	e.requireNoTemp(t)
}

func TestFSWrite_ProblemsTheModelCanFix(t *testing.T) {
	e := newEnv(t, func(c *tools.Config) { c.MaxWriteBytes = 8 })
	e.write(t, "dir/f.txt", "x")
	e.problem(t, tools.CodeNotAFile, "fs.write", args("path", "dir", "content", "x"))
	e.problem(t, tools.CodeNotAFile, "fs.write", args("path", ".", "content", "x"))
	e.problem(t, tools.CodeNotADirectory, "fs.write", args("path", "dir/f.txt/new.txt", "content", "x"))
	e.problem(t, tools.CodeTooLarge, "fs.write", args("path", "big.txt", "content", "123456789"))
	e.ok(t, "fs.write", args("path", "ok.txt", "content", "12345678"))
	_, err := os.Stat(filepath.Join(e.root, "big.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
	require.Equal(t, "x", e.read(t, "dir/f.txt"))
	e.requireNoTemp(t)
}

func TestFSRead_SizeBound(t *testing.T) {
	e := newEnv(t, func(c *tools.Config) { c.MaxReadBytes = 10 })
	e.write(t, "ten.txt", strings.Repeat("x", 10))
	e.write(t, "eleven.txt", strings.Repeat("x", 11))
	require.Len(t, e.ok(t, "fs.read", args("path", "ten.txt")), 10)
	e.problem(t, tools.CodeTooLarge, "fs.read", args("path", "eleven.txt"))

	// The default is the most a tool result can hold.
	d := newEnv(t)
	d.write(t, "max.txt", strings.Repeat("x", bound.MaxToolResultBytes))
	d.write(t, "over.txt", strings.Repeat("x", bound.MaxToolResultBytes+1))
	require.Len(t, d.ok(t, "fs.read", args("path", "max.txt")), bound.MaxToolResultBytes)
	d.problem(t, tools.CodeTooLarge, "fs.read", args("path", "over.txt"))
}

func TestK8_CancelledCallsDoNothing(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range [][2]string{
		{"fs.write", args("path", "x.txt", "content", "x")},
		{"fs.read", args("path", "x.txt")},
		{"text.stats", args("text", "x")},
	} {
		_, err := e.callCtx(t, ctx, c[0], c[1])
		require.ErrorIs(t, err, context.Canceled)
		var ee *tool.ExecutionError
		require.ErrorAs(t, err, &ee)
		require.Equal(t, tool.Definitive, ee.Outcome())
	}
	_, err := os.Stat(filepath.Join(e.root, "x.txt"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestK7_AVanishedWorkspaceIsADefinitiveExecutionError(t *testing.T) {
	e := newEnv(t)
	require.NoError(t, os.RemoveAll(e.root))
	for _, c := range [][2]string{
		{"fs.write", args("path", "x.txt", "content", "x")},
		{"fs.read", args("path", "x.txt")},
	} {
		_, err := e.call(t, c[0], c[1])
		var ee *tool.ExecutionError
		require.ErrorAs(t, err, &ee, "%v", err)
		require.Equal(t, tool.Definitive, ee.Outcome())
		require.Equal(t, tool.NoRetry, ee.Retry())
		require.Equal(t, tools.CodeIOError, ee.Problem().Code())
	}
}

func TestFSWrite_ConcurrentWritesLeaveOneWholeContent(t *testing.T) {
	e := newEnv(t)
	contents := make([]string, 8)
	for i := range contents {
		contents[i] = strings.Repeat(string(rune('a'+i)), 4096)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(contents))
	for i, c := range contents {
		wg.Go(func() {
			call, err := tool.NewCall("call-1", "fs.write", []byte(args("path", "shared/file.txt", "content", c)))
			if err == nil {
				_, err = e.d.Dispatch(context.Background(), call, nil)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
	require.Contains(t, contents, e.read(t, "shared/file.txt"))
	e.requireNoTemp(t)
}
