package tools_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/tools"
)

// env is a workspace inside a temporary directory, with a sibling
// directory "outside" that no tool may touch, and the tools behind the
// kernel's canonical dispatcher, which rejects any outcome that breaks the
// tool protocol (K7).
type env struct {
	root    string // the workspace, as given to tools.New
	outside string
	d       *tool.Canonical
}

func newEnv(t *testing.T, mutate ...func(*tools.Config)) *env {
	t.Helper()
	base := t.TempDir()
	e := &env{root: filepath.Join(base, "ws"), outside: filepath.Join(base, "outside")}
	require.NoError(t, os.Mkdir(e.root, 0o755))
	require.NoError(t, os.Mkdir(e.outside, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(e.outside, "secret.txt"), []byte("outside secret"), 0o644))
	cfg := tools.Config{Root: e.root}
	for _, m := range mutate {
		m(&cfg)
	}
	ts, err := tools.New(cfg)
	require.NoError(t, err)
	e.d, err = tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	require.NoError(t, err)
	return e
}

// call runs one call through the dispatcher; name and args are the model's.
func (e *env) call(t *testing.T, name, args string) (tool.Result, error) {
	t.Helper()
	return e.callCtx(t, context.Background(), name, args)
}

func (e *env) callCtx(t *testing.T, ctx context.Context, name, args string) (tool.Result, error) {
	t.Helper()
	c, err := tool.NewCall(id.Call("call-1"), name, []byte(args))
	require.NoError(t, err)
	return e.d.Dispatch(ctx, c, nil)
}

// ok runs a call that must succeed without a problem and returns its content.
func (e *env) ok(t *testing.T, name, args string) string {
	t.Helper()
	r, err := e.call(t, name, args)
	require.NoError(t, err)
	p, has := r.Problem()
	require.False(t, has, "unexpected problem %v", p)
	return r.Content()
}

// problem runs a call that must come back as a problem result with code.
func (e *env) problem(t *testing.T, code, name, args string) {
	t.Helper()
	r, err := e.call(t, name, args)
	require.NoError(t, err)
	p, has := r.Problem()
	require.True(t, has, "want problem %s, got content %q", code, r.Content())
	require.Equal(t, code, p.Code(), p.Message())
	require.Equal(t, id.Call("call-1"), r.CallID())
}

func (e *env) write(t *testing.T, rel, content string) {
	t.Helper()
	p := filepath.Join(e.root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func (e *env) read(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.root, filepath.FromSlash(rel)))
	require.NoError(t, err)
	return string(b)
}

// requireUntouched checks the outside directory still holds only its one
// file with its content.
func (e *env) requireUntouched(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(e.outside)
	require.NoError(t, err)
	require.Len(t, entries, 1)
	b, err := os.ReadFile(filepath.Join(e.outside, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "outside secret", string(b))
}

// requireNoTemp checks that no temporary file of fs.write is left anywhere
// in the workspace.
func (e *env) requireNoTemp(t *testing.T) {
	t.Helper()
	require.NoError(t, filepath.WalkDir(e.root, func(p string, d os.DirEntry, err error) error {
		require.NoError(t, err)
		require.False(t, strings.HasPrefix(d.Name(), tools.TempPrefix), "temporary file left: %s", p)
		return nil
	}))
}

func args(kv ...string) string {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}
