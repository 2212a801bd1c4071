package boundary

import (
	"context"
	"go/parser"
	"go/token"
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
