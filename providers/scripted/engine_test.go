package scripted_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

// memFS stands in for the compiled fs.read, fs.write and text.stats tools
// (this adapter may not import tools/): same names and effects, files in a
// map.
type memFS struct {
	mu    sync.Mutex
	files map[string]string
	calls []string
}

func (f *memFS) tools() []tool.Tool {
	f.files = map[string]string{}
	type args struct {
		Path    string `json:"path"`
		Content string `json:"content"`
		Text    string `json:"text"`
	}
	decode := func(c tool.Call) args {
		var a args
		must(0, json.Unmarshal(c.Arguments(), &a))
		f.mu.Lock()
		f.calls = append(f.calls, c.Name())
		f.mu.Unlock()
		return a
	}
	return []tool.Tool{
		enginetest.Tool{
			Def: must(tool.NewDefinition(tool.DefinitionConfig{Name: "fs.write", Effect: tool.Mutating, Replay: tool.Idempotent,
				Capabilities: []tool.Capability{tool.FilesystemWrite}})),
			Fn: func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
				a := decode(c)
				f.mu.Lock()
				f.files[a.Path] = a.Content
				f.mu.Unlock()
				return tool.NewResult(c.ID(), `{"path":`+strconv.Quote(a.Path)+`}`)
			},
		},
		enginetest.Tool{
			Def: must(tool.NewDefinition(tool.DefinitionConfig{Name: "fs.read", Effect: tool.ReadOnly, Replay: tool.Safe,
				Capabilities: []tool.Capability{tool.FilesystemRead}})),
			Fn: func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
				a := decode(c)
				f.mu.Lock()
				content, ok := f.files[a.Path]
				f.mu.Unlock()
				if !ok {
					return tool.NewProblemResult(c.ID(), problem.Must("not_found", "no such file"), "")
				}
				return tool.NewResult(c.ID(), content)
			},
		},
		enginetest.Tool{
			Def: must(tool.NewDefinition(tool.DefinitionConfig{Name: "text.stats", Effect: tool.ReadOnly, Replay: tool.Safe})),
			Fn: func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
				a := decode(c)
				return tool.NewResult(c.ID(), `{"words":`+strconv.Itoa(len(strings.Fields(a.Text)))+`}`)
			},
		},
	}
}

type worker struct {
	eng *engine.Engine
	def engine.Definition
	rec *enginetest.Recorder
}

func newWorker(t *testing.T, name string, s scripted.Script, plans plan.Source) *worker {
	t.Helper()
	w := &worker{rec: &enginetest.Recorder{}}
	var err error
	w.eng, err = engine.New(engine.Config{
		Provider: provider(t, s),
		Plans:    plans,
		IDs:      &id.Counter{Prefix: name + "/"},
		Clock:    &enginetest.Clock{},
		Required: []eventlog.Observer{w.rec},
	})
	require.NoError(t, err)
	w.def = must(engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted", MaxTurns: 4}))
	t.Cleanup(func() { require.NoError(t, w.eng.Close(context.Background())) })
	return w
}

func (w *worker) run(t *testing.T, input string) engine.Result {
	t.Helper()
	r, err := w.eng.Start(context.Background(), w.def, engine.Input{Message: user(input)})
	require.NoError(t, err)
	res, err := r.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)
	return res
}

func TestBuiltin_ReviewLoopRunsToApprovalThroughTheEngine(t *testing.T) {
	fs := &memFS{}
	plans := must(enginetest.Plan("plan-1", fs.tools()...))
	ws, rs := scripted.Builtin()
	writer := newWorker(t, scripted.WriterName, ws, plans)
	reviewer := newWorker(t, scripted.ReviewerName, rs, plans)

	// Round 1: the writer writes a draft through fs.write and answers.
	res := writer.run(t, "Write a short note about small Go packages.")
	require.Equal(t, 2, res.Turns)
	require.Equal(t, must(modelUsage(340, 170)), res.Usage)
	draft1 := fs.files[scripted.DraftPath]
	require.NotEmpty(t, draft1)
	require.True(t, strings.HasSuffix(res.Final.Text(), draft1))
	require.Equal(t, []string{"fs.write"}, fs.calls)

	// The reviewer reads it, counts it and rejects it with feedback.
	res = reviewer.run(t, res.Final.Text())
	rejection := res.Final.Text()
	require.True(t, strings.HasPrefix(rejection, "REJECTED: "))
	require.Contains(t, rejection, scripted.FeedbackMarker)
	require.NotContains(t, rejection, scripted.DoneMarker)
	require.Equal(t, []string{"fs.write", "fs.read", "text.stats"}, fs.calls)

	// Round 2: the rejection, passed on verbatim, makes the writer revise.
	res = writer.run(t, rejection)
	require.True(t, strings.HasPrefix(res.Final.Text(), scripted.RevisionMarker))
	draft2 := fs.files[scripted.DraftPath]
	require.NotEqual(t, draft1, draft2)
	require.True(t, strings.HasSuffix(res.Final.Text(), draft2))

	// The reviewer approves the revision.
	res = reviewer.run(t, "Writer says:\n\n"+res.Final.Text())
	require.Contains(t, res.Final.Text(), scripted.DoneMarker)
	require.Equal(t, []string{"fs.write", "fs.read", "text.stats", "fs.write", "fs.read", "text.stats"}, fs.calls)
}

func TestK30_BuiltinWriterRunIsByteForByteRepeatable(t *testing.T) {
	encode := func() []byte {
		fs := &memFS{}
		ws, _ := scripted.Builtin()
		w := newWorker(t, scripted.WriterName, ws, must(enginetest.Plan("plan-1", fs.tools()...)))
		w.run(t, "Write a note.")
		var b []byte
		for _, e := range w.rec.Events() {
			b = e.AppendJSON(b)
			b = append(b, '\n')
		}
		return b
	}
	first := encode()
	require.Contains(t, string(first), `"call_id":"writer/op-1-c1"`)
	require.Equal(t, string(first), string(encode()))
}

func TestBuiltin_UnwiredToolFailsTheRunWithANamedProblem(t *testing.T) {
	ws, _ := scripted.Builtin()
	plans := must(enginetest.Plan("plan-1", enginetest.Echo()))
	w := newWorker(t, scripted.WriterName, ws, plans)
	r, err := w.eng.Start(context.Background(), w.def, engine.Input{Message: user("task")})
	require.NoError(t, err)
	res, err := r.Wait(context.Background())
	require.Error(t, err)
	require.Equal(t, engine.Failed, res.Status)
	require.Equal(t, scripted.CodeToolNotOffered, res.Problem.Code())
}
