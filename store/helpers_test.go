package store_test

import (
	"bytes"
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/store"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func dbPath(t testing.TB) string { return filepath.Join(t.TempDir(), "spice.db") }

// open opens a writable store and closes it when the test ends.
func open(t testing.TB, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })
	return st
}

// newLog returns a named log whose required observers are obs.
func newLog(t testing.TB, name string, obs ...eventlog.Observer) *eventlog.Log {
	t.Helper()
	l, err := eventlog.New(eventlog.Config{Name: name, MaxEvents: 1 << 14, MaxBytes: 64 << 20, Required: obs})
	require.NoError(t, err)
	return l
}

func raw(t testing.TB, s string) eventlog.Raw {
	t.Helper()
	r, err := eventlog.NewRaw([]byte(s))
	require.NoError(t, err)
	return r
}

// live records what `run --json` prints for each log: every event's
// canonical bytes and a newline, in the order observers are told.
type live struct {
	mu    sync.Mutex
	byLog map[string]*bytes.Buffer
}

func newLive() *live { return &live{byLog: map[string]*bytes.Buffer{}} }

func (l *live) Observe(_ context.Context, e eventlog.Event) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.byLog[e.Log()]
	if b == nil {
		b = &bytes.Buffer{}
		l.byLog[e.Log()] = b
	}
	b.Write(e.AppendJSON(nil))
	b.WriteByte('\n')
	return nil
}

func (l *live) lines(log string) []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.byLog[log].Bytes())
}

// relay copies every event of a worker's run into a pair timeline, the
// way the orchestrator does: same kind and time, payload wrapped with the
// worker, the run ID and the run sequence.
type relay struct {
	pair   *eventlog.Log
	worker string
}

func (r relay) Observe(ctx context.Context, e eventlog.Event) error {
	inner, err := eventlog.NewRaw(e.Payload().AppendJSON(nil))
	if err != nil {
		return err
	}
	o := eventlog.AppendObject(nil)
	o.String("worker", r.worker)
	o.String("run_id", e.Log())
	o.Uint("run_seq", e.Seq())
	o.Raw("payload", inner)
	wrapped, err := eventlog.NewRaw(o.End())
	if err != nil {
		return err
	}
	_, err = r.pair.Append(ctx, eventlog.Record{Kind: e.Kind(), Time: e.Time(), Terminal: event.Terminal(e.Kind()), Payload: wrapped})
	return err
}

// writeTool is a mutating tool; hook, when set, runs inside Execute.
func writeTool(t testing.TB, hook func(ctx context.Context)) enginetest.Tool {
	t.Helper()
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "write", Description: "Writes a file.", Effect: tool.Mutating, Replay: tool.Unsafe})
	require.NoError(t, err)
	return enginetest.Tool{Def: def, Fn: func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		if hook != nil {
			hook(ctx)
		}
		return tool.NewResult(call.ID(), "written")
	}}
}

func plans(t testing.TB, tools ...tool.Tool) *plan.Memory {
	t.Helper()
	p, err := enginetest.Plan("plan-1", tools...)
	require.NoError(t, err)
	return p
}

func newEngine(t testing.TB, ids id.Source, clock engine.Clock, src plan.Source, script [][]model.Item, finalize time.Duration, obs ...eventlog.Observer) *engine.Engine {
	t.Helper()
	eng, err := engine.New(engine.Config{
		Provider:        enginetest.NewProvider(script...),
		Plans:           src,
		IDs:             ids,
		Clock:           clock,
		Required:        obs,
		FinalizeTimeout: finalize,
	})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, eng.Close(context.Background())) })
	return eng
}

func definition(t testing.TB, name string) engine.Definition {
	t.Helper()
	d, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted-1", MaxTurns: 4})
	require.NoError(t, err)
	return d
}

func user(t testing.TB, s string) message.Message {
	t.Helper()
	m, err := message.User(s)
	require.NoError(t, err)
	return m
}

func runOnce(t testing.TB, eng *engine.Engine, worker, input string) (*engine.Run, engine.Result, error) {
	t.Helper()
	r, err := eng.Start(context.Background(), definition(t, worker), engine.Input{Message: user(t, input)})
	require.NoError(t, err)
	res, err := r.Wait(context.Background())
	return r, res, err
}

// pairResult is what runPair produced.
type pairResult struct {
	pairID string
	runs   []string // writer's run, then reviewer's
	live   *live
}

// runPair runs one writer/reviewer pair recorded by st, as the orchestrator
// will: a timeline named by the pair ID starting with pair.started, the
// writer's run (a mutating tool call, then an answer) relayed into it, a
// handoff, the reviewer's run relayed, and pair.completed. Each worker has
// its own engine; both share the pair's plan, IDs and clock.
func runPair(t testing.TB, st *store.Store, pairID string) pairResult {
	t.Helper()
	return playPair(t, st, pairID, true)
}

// runPairOnce is runPair with the store told of the pair timeline only, as
// a composed pair is: each run's events reach it once, relayed.
func runPairOnce(t testing.TB, st *store.Store, pairID string) pairResult {
	t.Helper()
	return playPair(t, st, pairID, false)
}

func playPair(t testing.TB, st *store.Store, pairID string, runRows bool) pairResult {
	t.Helper()
	ctx := context.Background()
	lv := newLive()
	timeline := newLog(t, pairID, st, lv)
	observers := func(r relay) []eventlog.Observer {
		if runRows {
			return []eventlog.Observer{st, lv, r}
		}
		return []eventlog.Observer{lv, r}
	}
	clock := &enginetest.Clock{Start: t0}
	ids := &id.Counter{Prefix: pairID + "/"}
	src := plans(t, writeTool(t, nil))
	appendPair := func(kind, payload string, terminal bool) {
		_, err := timeline.Append(ctx, eventlog.Record{Kind: kind, Time: clock.Now(), Terminal: terminal, Payload: raw(t, payload)})
		require.NoError(t, err)
	}
	// Payloads shaped as orchestrator/timeline.go writes them.
	appendPair("pair.started", `{"pair_id":"`+pairID+`","plan_id":"plan-1","plan_fingerprint":"ab","pattern":"relay","workers":{"first":"writer","second":"reviewer"}}`, false)

	writer := newEngine(t, ids, clock, src, [][]model.Item{
		{enginetest.Call("call-1", "write", `{"path":"a.txt"}`), enginetest.Done(10, 2)},
		enginetest.Answer("draft: a.txt"),
	}, 0, observers(relay{pair: timeline, worker: "writer"})...)
	r1, res, err := runOnce(t, writer, "writer", "write a.txt")
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)

	appendPair("pair.handoff", `{"round":1,"from":"writer","to":"reviewer","from_run_id":"`+string(r1.ID())+`","last_seq":13,"sha256":"00","bytes":12,"answer_bytes":12,"cut":false}`, false)

	reviewer := newEngine(t, ids, clock, src, [][]model.Item{enginetest.Answer("APPROVED")}, 0,
		observers(relay{pair: timeline, worker: "reviewer"})...)
	r2, res, err := runOnce(t, reviewer, "reviewer", "draft: a.txt")
	require.NoError(t, err)
	require.Equal(t, engine.Completed, res.Status)

	appendPair("pair.completed", `{"pair_id":"`+pairID+`","reason":"approved","rounds":1,"runs":2,"input_tokens":30,"output_tokens":12,"tool_calls":1}`, true)
	require.NoError(t, timeline.Close(ctx))
	return pairResult{pairID: pairID, runs: []string{string(r1.ID()), string(r2.ID())}, live: lv}
}

func replay(t testing.TB, st *store.Store, log string) []byte {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, st.ReplayJSON(context.Background(), &b, log))
	return b.Bytes()
}
