package tool_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Some tests start goroutines that use a reporter after Execute returns.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// execFunc is the body of a fake tool.
type execFunc func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error)

// fakeTool is a tool whose definition and body the test controls.
type fakeTool struct {
	mu    sync.Mutex
	def   tool.Definition
	reads int // calls to Definition
	runs  int // calls to Execute
	exec  execFunc
}

func (f *fakeTool) Definition() tool.Definition {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	return f.def
}

func (f *fakeTool) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	f.mu.Lock()
	f.runs++
	f.mu.Unlock()
	return f.exec(ctx, call, r)
}

func (f *fakeTool) Runs() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs
}

func def(t testing.TB, name string, e tool.Effect, r tool.Replay, caps ...tool.Capability) tool.Definition {
	t.Helper()
	d, err := tool.NewDefinition(tool.DefinitionConfig{
		Name: name, Description: "test tool " + name, Effect: e, Replay: r, Capabilities: caps,
	})
	require.NoError(t, err)
	return d
}

func readOnly(t testing.TB, name string) tool.Definition {
	return def(t, name, tool.ReadOnly, tool.Safe, tool.FilesystemRead)
}

func mutating(t testing.TB, name string, r tool.Replay) tool.Definition {
	return def(t, name, tool.Mutating, r, tool.FilesystemWrite)
}

func newTool(d tool.Definition, exec execFunc) *fakeTool { return &fakeTool{def: d, exec: exec} }

func dispatcher(t testing.TB, tools ...tool.Tool) *tool.Canonical {
	t.Helper()
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	require.NoError(t, err)
	return d
}

func call(t testing.TB, callID id.Call, name string) tool.Call {
	t.Helper()
	c, err := tool.NewCall(callID, name, []byte(`{"path":"a.txt"}`))
	require.NoError(t, err)
	return c
}

func result(t testing.TB, callID id.Call, content string) tool.Result {
	t.Helper()
	r, err := tool.NewResult(callID, content)
	require.NoError(t, err)
	return r
}

func prob(code string) problem.Problem { return problem.Must(code, "something about "+code) }

func progress(t testing.TB, callID id.Call, msg string) tool.Progress {
	t.Helper()
	p, err := tool.NewProgress(callID, msg)
	require.NoError(t, err)
	return p
}

// recorder is the caller's Reporter: it records what it is given and fails
// with err (if set).
type recorder struct {
	mu    sync.Mutex
	got   []tool.Progress
	err   error
	panic bool
}

func (r *recorder) Report(_ context.Context, p tool.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.panic {
		panic("reporter exploded with secret-token")
	}
	r.got = append(r.got, p)
	return r.err
}

func (r *recorder) Count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.got)
}

// executionError asserts err is (or unwraps to) an *ExecutionError.
func executionError(t testing.TB, err error) *tool.ExecutionError {
	t.Helper()
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	return ee
}
