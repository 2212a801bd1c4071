package telemetry_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/telemetry"
)

// lines is an observer that keeps each event as its JSON line, as a store
// replays it.
type lines struct{ bytes.Buffer }

func (l *lines) Observe(_ context.Context, e eventlog.Event) error {
	l.Write(append(e.AppendJSON(nil), '\n'))
	return nil
}

// TestD3_ARecordCarriesTheProvidersAndTheParent writes a pair's trace
// record and reads it back; a replay after ContinueRecord is drawn in the
// parent's trace, below the parent, with the recorded provider names.
func TestD3_ARecordCarriesTheProvidersAndTheParent(t *testing.T) {
	cfg := builtinPair(t, nil)
	names := telemetry.ProviderNames(&cfg)
	require.Equal(t, map[string]string{"writer": "spice_orch.scripted", "reviewer": "spice_orch.scripted"}, names)
	instrumented := builtinPair(t, nil)
	tel0, err := telemetry.New(telemetry.Config{})
	require.NoError(t, err)
	tel0.Instrument(&instrumented)
	require.Equal(t, names, telemetry.ProviderNames(&instrumented), "an instrumented provider still says its name")
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	parent := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, Remote: true})
	var l lines
	require.NoError(t, telemetry.WriteRecord(context.Background(), &l,
		telemetry.Record{PairID: pairID, Providers: names, Parent: parent}, time.Unix(1, 0)))
	require.Contains(t, l.String(), `"kind":"trace.recorded"`)
	rec, err := telemetry.ReadRecord(bytes.NewReader(l.Bytes()))
	require.NoError(t, err)
	require.Equal(t, telemetry.Record{PairID: pairID, Providers: names, Parent: parent}, rec)

	// The pair's timeline, drawn again from its JSON lines.
	p, _, err := play(t, context.Background(), builtinPair(t, nil))
	require.NoError(t, err)
	tr := newTracing(t)
	tel := tr.telemetry(t, telemetry.Config{Providers: rec.Providers})
	tel.ContinueRecord(context.Background(), rec)
	require.NoError(t, tel.ReplayJSON(context.Background(), bytes.NewReader([]byte(jsonLines(events(t, p))))))
	spans := tr.exp.GetSpans()
	require.Len(t, spans, 19)
	root := named(spans, "invoke_workflow review_loop")[0]
	require.Equal(t, parent, root.Parent)
	for _, s := range spans {
		require.Equal(t, tid, s.SpanContext.TraceID())
	}
	require.Equal(t, "spice_orch.scripted", attr(named(spans, "chat scripted-1")[0], "gen_ai.provider.name"))

	_, err = telemetry.ReadRecord(bytes.NewReader(nil))
	require.ErrorIs(t, err, telemetry.ErrMalformed)
}

// decorated is a provider decorator that says what it decorates, as
// providers/coalesce does.
type decorated struct{ inner model.Provider }

func (d decorated) Stream(ctx context.Context, r model.Request) (model.Stream, error) {
	return d.inner.Stream(ctx, r)
}

func (d decorated) Unwrap() model.Provider { return d.inner }

// TestD3_ADecoratorIsLookedThroughForWhatTheProviderSays decorates each
// worker's provider: the pair is still drawn with the names the
// providers give themselves.
func TestD3_ADecoratorIsLookedThroughForWhatTheProviderSays(t *testing.T) {
	cfg := builtinPair(t, nil)
	want := telemetry.ProviderNames(&cfg)
	cfg.First.Engine.Provider = decorated{decorated{cfg.First.Engine.Provider}}
	cfg.Second.Engine.Provider = decorated{cfg.Second.Engine.Provider}
	require.Equal(t, want, telemetry.ProviderNames(&cfg))
}
