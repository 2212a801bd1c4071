package telemetry_test

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/telemetry"
)

// jsonTracing draws into OTLP JSON, the bytes a trace export would send.
type jsonTracing struct {
	tp  *sdktrace.TracerProvider
	out *bytes.Buffer
}

func newJSONTracing(t testing.TB) *jsonTracing {
	out := &bytes.Buffer{}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(telemetry.NewJSONExporter(out)),
		sdktrace.WithResource(resource.Empty()), sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return &jsonTracing{tp: tp, out: out}
}

func (j *jsonTracing) telemetry(t testing.TB) *telemetry.Telemetry {
	cfg := telemetryConfig()
	cfg.TracerProvider = j.tp
	tel, err := telemetry.New(cfg)
	require.NoError(t, err)
	return tel
}

// flushed returns the OTLP JSON of everything drawn.
func (j *jsonTracing) flushed(t testing.TB) string {
	require.NoError(t, j.tp.Shutdown(context.Background()))
	return j.out.String()
}

// pairs are the pairs of the span-tree tests, with their timelines'
// observer and context.
var pairs = map[string]func(t testing.TB, obs eventlog.Observer) (orchestrator.Config, context.Context){
	"review": func(t testing.TB, obs eventlog.Observer) (orchestrator.Config, context.Context) {
		return builtinPair(t, obs), context.Background()
	},
	"cancelled": func(t testing.TB, obs eventlog.Observer) (orchestrator.Config, context.Context) {
		cfg := builtinPair(t, obs)
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		cfg.Timeline.Required = append(cfg.Timeline.Required, cancelAt(event.KindToolStarted, cancel))
		return cfg, ctx
	},
	"failed-tool": func(t testing.TB, obs eventlog.Observer) (orchestrator.Config, context.Context) {
		return failingToolPair(t, obs), context.Background()
	},
}

// TestD3_AReplayedPairIsTheSameTrace draws each pair live, then replays
// its timeline's JSON lines: the OTLP JSON of both is the same, byte for
// byte — IDs, times, attributes, events and links.
func TestD3_AReplayedPairIsTheSameTrace(t *testing.T) {
	for name, build := range pairs {
		t.Run(name, func(t *testing.T) {
			live := newJSONTracing(t)
			cfg, ctx := build(t, live.telemetry(t))
			p, _, _ := play(t, ctx, cfg)
			want := live.flushed(t)
			require.Contains(t, want, `"name":"invoke_workflow `)

			replay := newJSONTracing(t)
			tel := replay.telemetry(t)
			require.NoError(t, tel.ReplayJSON(context.Background(), strings.NewReader(jsonLines(events(t, p)))))
			require.Equal(t, want, replay.flushed(t))
			require.Zero(t, tel.Stats().Open)
		})
	}
}

// TestD3_APairReplayedFromTheStoreIsTheSameTrace records the built-in
// pair in a real SQLite store, then replays the store's JSON lines.
func TestD3_APairReplayedFromTheStoreIsTheSameTrace(t *testing.T) {
	ctx := context.Background()
	st, err := store.OpenConfig(ctx, store.Config{Path: filepath.Join(t.TempDir(), "runs.db")})
	require.NoError(t, err)
	defer st.Close()
	live := newJSONTracing(t)
	cfg := builtinPair(t, live.telemetry(t))
	cfg.Timeline.Required = []eventlog.Observer{st}
	cfg.First.Engine.Required = []eventlog.Observer{st}
	cfg.Second.Engine.Required = []eventlog.Observer{st}
	_, _, err = play(t, ctx, cfg)
	require.NoError(t, err)

	var lines bytes.Buffer
	require.NoError(t, st.ReplayJSON(ctx, &lines, pairID))
	replay := newJSONTracing(t)
	require.NoError(t, replay.telemetry(t).ReplayJSON(ctx, &lines))
	require.Equal(t, live.flushed(t), replay.flushed(t))
}

// TestD3_AnInterruptedTimelineEndsAtItsLastEvent replays a timeline cut
// before its terminal, as a crashed process leaves one: every open span
// ends at the last event, as interrupted.
func TestD3_AnInterruptedTimelineEndsAtItsLastEvent(t *testing.T) {
	p, _, err := play(t, context.Background(), builtinPair(t, nil))
	require.NoError(t, err)
	evs := events(t, p)
	var cut []eventlog.Event
	for _, e := range evs {
		cut = append(cut, e)
		if e.Kind() == event.KindToolStarted {
			break
		}
	}
	tr := newTracing(t)
	tel := tr.telemetry(t, telemetryConfig())
	require.NoError(t, tel.ReplayJSON(context.Background(), strings.NewReader(jsonLines(cut))))
	spans := tr.exp.GetSpans()
	require.Equal(t, `invoke_workflow review_loop ERROR interrupted
  invoke_agent writer ERROR interrupted
    chat scripted-1 [client]
    execute_tool fs.write ERROR interrupted
`, tree(spans))
	last := cut[len(cut)-1].Time()
	for _, s := range named(spans, "execute_tool fs.write") {
		require.Equal(t, last, s.EndTime)
	}
	require.Zero(t, tel.Stats().Open)
}

// TestD3_ABadTimelineIsATypedError feeds replays what a store or a file
// could hold but a timeline cannot: each is a *ReplayError naming its
// line, errors.Is ErrMalformed, and none panics or leaves a pair open.
func TestD3_ABadTimelineIsATypedError(t *testing.T) {
	p, _, err := play(t, context.Background(), builtinPair(t, nil))
	require.NoError(t, err)
	good := strings.SplitAfter(jsonLines(events(t, p)), "\n")
	for name, c := range map[string]struct {
		in   string
		line int
	}{
		"not json":           {"{not json\n", 1},
		"no pair.started":    {good[1], 1},
		"two pair.started":   {good[0] + good[0], 2},
		"unknown field":      {strings.Replace(good[0], `"pattern"`, `"patterns"`, 1), 1},
		"not canonical":      {strings.Replace(good[1], `"run_seq":1`, `"run_seq": 1`, 1), 1},
		"a run event wrong":  {good[0] + strings.Replace(good[1], `"plan_id"`, `"plan"`, 2), 2},
		"an unknown kind":    {good[0] + strings.Replace(good[1], `"run.started"`, `"run.begun"`, 1), 2},
		"a line over bounds": {good[0] + `{"seq":2,"kind":"x","payload":"` + strings.Repeat("a", eventlog.MaxEventBytes) + "\"}\n", 2},
	} {
		t.Run(name, func(t *testing.T) {
			tr := newTracing(t)
			tel := tr.telemetry(t, telemetryConfig())
			err := tel.ReplayJSON(context.Background(), strings.NewReader(c.in))
			require.ErrorIs(t, err, telemetry.ErrMalformed)
			var re *telemetry.ReplayError
			require.True(t, errors.As(err, &re))
			require.Equal(t, c.line, re.Line)
			require.NotContains(t, err.Error(), "aaaa")
			require.Zero(t, tel.Stats().Open)
		})
	}
	var be *bound.Error
	err = newTracing(t).telemetry(t, telemetryConfig()).ReplayJSON(context.Background(), strings.NewReader("{}\n"))
	require.True(t, errors.As(err, &be), "%v", err)
}
