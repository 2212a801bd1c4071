package boundary

import (
	"context"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestDiff(t *testing.T) {
	require.Equal(t, []string{"c"}, Diff([]string{"a", "b"}, []string{"a", "c"}))
	require.Nil(t, Diff([]string{"a"}, []string{"a"}))
}

func TestFileFindsNamesStringsAndDeclarationCommentsOnly(t *testing.T) {
	src := `// Package x may say what it must not know: pair.
package x

// WorkerPool is named in a declaration comment.
type WorkerPool int

const kind = "handoff.done"

func f() {
	// a pair in a body comment is not checked
	_ = 1
}
`
	f, err := parser.ParseFile(token.NewFileSet(), "x.go", src, parser.ParseComments)
	require.NoError(t, err)
	var got []string
	for _, x := range NewForms(ForbiddenWords()).File(f) {
		got = append(got, x.What+":"+x.Match.Word)
	}
	require.Equal(t, []string{"declaration comment:worker", "type name:worker", "string:handoff"}, got)
}

func TestKernelDepsOfThisModuleAreKernelPackages(t *testing.T) {
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	deps, err := KernelDeps(context.Background(), goCmd, root)
	require.NoError(t, err)
	require.NotEmpty(t, deps)
	for _, d := range deps {
		require.True(t, strings.HasPrefix(d, "github.com/spice-orch/spice-orch/kernel/"), d)
	}
}

// TestKernelAPIListsFieldTypesAndMethodSignatures: a field's type and an
// interface method's signature are part of an entry, so changing either
// changes the listing.
func TestKernelAPIListsFieldTypesAndMethodSignatures(t *testing.T) {
	list := func(src string) []string {
		root := t.TempDir()
		require.NoError(t, os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n\ngo 1.26\n"), 0o644))
		require.NoError(t, os.MkdirAll(filepath.Join(root, "kernel", "x"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, "kernel", "x", "x.go"), []byte(src), 0o644))
		api, err := kernelAPI(root)
		require.NoError(t, err)
		return api
	}
	a := list("package x\n\ntype T struct{ F int }\n\ntype I interface{ M(s string) error }\n\nconst C = 64 << 10\n")
	require.Equal(t, []string{
		"kernel/x const C untyped int = 65536",
		"kernel/x type I interface",
		"kernel/x method I.M(s string) error",
		"kernel/x type T struct",
		"kernel/x field T.F int",
	}, a)
	b := list("package x\n\ntype T struct{ F int64 }\n\ntype I interface{ M(s string, more ...any) error }\n\nconst C = 1 << 20\n")
	require.Equal(t, []string{"kernel/x const C untyped int = 65536", "kernel/x method I.M(s string) error", "kernel/x field T.F int"}, Diff(b, a))
}
