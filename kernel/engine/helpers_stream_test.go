package engine_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Helpers for runs and model streams: starting and waiting, providers and
// streams made of functions, ID sources, stream failure cases, and the
// assertions on failures and secrets.

// start starts a run of definition(maxTurns) with the message "hello"
// under ctx.
func (f *fixture) start(t testing.TB, ctx context.Context, maxTurns int) *engine.Run {
	t.Helper()
	r, err := f.eng.Start(ctx, definition(t, maxTurns), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	return r
}

// waitRun waits for r with a context that cannot end.
func waitRun(r *engine.Run) (engine.Result, error) { return r.Wait(context.Background()) }

// lateRun hands a run to callbacks (observers, tools) that may fire before
// Start has returned it: get blocks until set.
type lateRun struct {
	ready chan struct{}
	r     *engine.Run
}

func newLateRun() *lateRun { return &lateRun{ready: make(chan struct{})} }

func (l *lateRun) set(r *engine.Run) { l.r = r; close(l.ready) }

func (l *lateRun) get() *engine.Run { <-l.ready; return l.r }

// encodeAll concatenates the canonical encoding of every event.
func encodeAll(evs []eventlog.Event) []byte {
	var b []byte
	for _, e := range evs {
		b = e.AppendJSON(b)
	}
	return b
}

// payloadOf returns e's payload as a T, failing the test otherwise.
func payloadOf[T any](t testing.TB, e eventlog.Event) T {
	t.Helper()
	p, ok := e.Payload().(T)
	require.Truef(t, ok, "event %d (%s) has payload %T", e.Seq(), e.Kind(), e.Payload())
	return p
}

// readOnlyTool returns a read-only, safe tool named name running fn.
func readOnlyTool(t testing.TB, name string, fn func(context.Context, tool.Call, tool.Reporter) (tool.Result, error)) enginetest.Tool {
	t.Helper()
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: name, Description: "A test tool.", Effect: tool.ReadOnly, Replay: tool.Safe})
	require.NoError(t, err)
	return enginetest.Tool{Def: def, Fn: fn}
}

// providerFunc adapts a function to model.Provider.
type providerFunc func(ctx context.Context, req model.Request) (model.Stream, error)

func (f providerFunc) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	return f(ctx, req)
}

// funcStream is a model.Stream made of functions; a nil close returns nil.
type funcStream struct {
	recv  func() (model.Item, error)
	close func() error
}

func (s *funcStream) Recv() (model.Item, error) { return s.recv() }

func (s *funcStream) Close() error {
	if s.close == nil {
		return nil
	}
	return s.close()
}

// itemsThen returns a recv function that yields items and then err forever.
func itemsThen(err error, items ...model.Item) func() (model.Item, error) {
	i := 0
	return func() (model.Item, error) {
		if i < len(items) {
			i++
			return items[i-1], nil
		}
		return model.Item{}, err
	}
}

// countingIDs is an id.Source that counts its calls and, when panicAt is
// set, panics with panicValue on that call and every later one.
type countingIDs struct {
	inner      id.Counter
	calls      atomic.Int64
	panicAt    int64
	panicValue any
}

func (c *countingIDs) New(k id.Kind) string {
	if n := c.calls.Add(1); c.panicAt > 0 && n >= c.panicAt {
		panic(c.panicValue)
	}
	return c.inner.New(k)
}

// errorTexts returns the Error text of err and of everything it wraps.
func errorTexts(err error) []string {
	var out []string
	var walk func(error)
	walk = func(e error) {
		if e == nil {
			return
		}
		out = append(out, e.Error())
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			walk(u.Unwrap())
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		}
	}
	walk(err)
	return out
}

// requireNoSecret fails if secret appears in err, anything err wraps, or
// the encoded events.
func requireNoSecret(t testing.TB, secret string, err error, evs []eventlog.Event) {
	t.Helper()
	for _, s := range errorTexts(err) {
		require.NotContains(t, s, secret)
	}
	require.NotContains(t, string(encodeAll(evs)), secret)
}

// requireFailure asserts err is a *engine.Failure with the problem code and
// returns it.
func requireFailure(t testing.TB, err error, code string) *engine.Failure {
	t.Helper()
	var f *engine.Failure
	require.ErrorAs(t, err, &f)
	require.Equal(t, code, f.Problem.Code(), "failure problem")
	return f
}

// runHistory decodes the snapshot of a finished run and returns its history.
func runHistory(t testing.TB, r *engine.Run) []message.Message {
	t.Helper()
	b, err := r.Snapshot()
	require.NoError(t, err)
	s, err := engine.DecodeSnapshot(b)
	require.NoError(t, err)
	return slices.Collect(s.History())
}

// requireOneRunTerminal asserts that the last event is the run terminal and that nothing
// else in evs is one.
func requireOneRunTerminal(t testing.TB, evs []eventlog.Event, kind string) {
	t.Helper()
	require.NotEmpty(t, evs)
	require.Equal(t, kind, evs[len(evs)-1].Kind(), "the run terminal is the last event")
	for _, e := range evs[:len(evs)-1] {
		require.False(t, strings.HasPrefix(e.Kind(), "run.") && e.Kind() != "run.started", "run terminal %s at %d before the end", e.Kind(), e.Seq())
	}
}

var errInjected = errors.New("test failure")

// modelFailure is the event kinds of a text run whose only model operation
// fails after deltas text deltas.
func modelFailure(deltas int) []string {
	out := []string{"run.started", "turn.started", "model.started"}
	for range deltas {
		out = append(out, "model.text_delta")
	}
	return append(out, "model.failed", "turn.failed", "run.failed")
}

// streamCase runs one model operation scripted by items (through the
// scripted provider) or by provider, and checks the failure it must cause.
type streamCase struct {
	name      string
	items     []model.Item
	provider  model.Provider
	kinds     []string
	code      string
	observed  bool
	violation model.Violation // 0: no *model.StreamError expected
	exceeded  bool
}

func runStreamCases(t *testing.T, cases []streamCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, fixtureConfig{
				tools:  []tool.Tool{enginetest.Echo()},
				script: [][]model.Item{tc.items, enginetest.Answer("never")},
				mutate: func(c *engine.Config) {
					if tc.provider != nil {
						c.Provider = tc.provider
					}
				},
			})
			r, res, err := f.run(t, 4)
			evs := events(t, r)
			require.Equal(t, tc.kinds, kinds(evs))
			requireWellFormed(t, evs)
			failure := requireFailure(t, err, tc.code)
			require.Equal(t, engine.Failed, res.Status)
			mf := payloadOf[event.ModelFailed](t, evs[len(evs)-3])
			require.Equal(t, tc.code, mf.Problem.Code())
			require.Equal(t, tc.observed, mf.Observed)
			require.Equal(t, tc.code, payloadOf[event.TurnFailed](t, evs[len(evs)-2]).Problem.Code())
			require.Equal(t, tc.code, payloadOf[event.RunFailed](t, evs[len(evs)-1]).Problem.Code())
			var se *model.StreamError
			if tc.violation != 0 {
				require.ErrorAs(t, failure, &se)
				require.Equal(t, tc.violation, se.Violation)
			} else {
				require.False(t, errors.As(failure, &se))
			}
			require.Equal(t, tc.exceeded, errors.Is(err, bound.ErrExceeded))
			if tc.provider == nil {
				require.Equal(t, 1, f.provider.Calls(), "a failed stream is never retried")
			}
		})
	}
}

// countingProvider counts Stream calls and serves the same stream factory
// each time.
type countingProvider struct {
	calls  int
	stream func() model.Stream
}

func (p *countingProvider) Stream(context.Context, model.Request) (model.Stream, error) {
	p.calls++
	return p.stream(), nil
}

func countOf(ss []string, s string) int {
	n := 0
	for _, x := range ss {
		if x == s {
			n++
		}
	}
	return n
}

// oneCallScript is a run whose first model operation asks for one call of
// name and whose second answers; most call tests end before the second.
func oneCallScript(name string) [][]model.Item {
	return [][]model.Item{{enginetest.Call("call-1", name, `{}`), enginetest.Done(1, 1)}, enginetest.Answer("never")}
}

// failedCallKinds are the events of a run whose only tool call fails.
var failedCallKinds = []string{
	"run.started", "turn.started", "model.started", "model.completed",
	"tool.started", "tool.failed", "turn.failed", "run.failed",
}
