package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/embedded"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/telemetry"
)

// panickingProvider hands out tracers that panic on every span.
type panickingProvider struct{ embedded.TracerProvider }

func (panickingProvider) Tracer(string, ...trace.TracerOption) trace.Tracer { return panickingTracer{} }

type panickingTracer struct{ embedded.Tracer }

func (panickingTracer) Start(context.Context, string, ...trace.SpanStartOption) (context.Context, trace.Span) {
	panic("tracer broke")
}

// TestD3_APanickingTracerNeverFailsThePair draws with a tracer that panics:
// the pair ends approved exactly as without telemetry, and the panics are
// counted.
func TestD3_APanickingTracerNeverFailsThePair(t *testing.T) {
	tel, err := telemetry.New(telemetry.Config{TracerProvider: panickingProvider{}})
	require.NoError(t, err)
	p, res, err := play(t, context.Background(), builtinPair(t, tel))
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)
	require.Positive(t, tel.Stats().Failures)
	require.Positive(t, p.Stats().BestEffortFailures)
}

// blockingExporter blocks every export until released.
type blockingExporter struct{ release chan struct{} }

func (b blockingExporter) ExportSpans(ctx context.Context, _ []sdktrace.ReadOnlySpan) error {
	select {
	case <-b.release:
	case <-ctx.Done():
	}
	return nil
}
func (blockingExporter) Shutdown(context.Context) error { return nil }

// TestD3_AStuckBackendNeverBlocksThePair draws through a batch processor
// whose exporter never returns, with a queue of one span: the pair plays
// to its end regardless (the processor drops what does not fit).
func TestD3_AStuckBackendNeverBlocksThePair(t *testing.T) {
	exp := blockingExporter{release: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp, sdktrace.WithMaxQueueSize(1), sdktrace.WithMaxExportBatchSize(1)),
		sdktrace.WithIDGenerator(telemetry.IDGenerator()))
	defer func() {
		close(exp.release)
		require.NoError(t, tp.Shutdown(context.Background()))
	}()
	tel, err := telemetry.New(telemetry.Config{TracerProvider: tp})
	require.NoError(t, err)
	for range 3 {
		_, res, err := play(t, context.Background(), builtinPair(t, tel))
		require.NoError(t, err)
		require.Equal(t, orchestrator.ReasonApproved, res.Reason)
	}
	require.Zero(t, tel.Stats().Open)
}

// TestD3_LostEventsAreCountedAndDrawn feeds the observer a timeline with
// a gap, as a full mailbox leaves one: the gap is counted and marked on
// the pair span, and everything else is still drawn.
func TestD3_LostEventsAreCountedAndDrawn(t *testing.T) {
	p, _, err := play(t, context.Background(), builtinPair(t, nil))
	require.NoError(t, err)
	evs := events(t, p)
	tr := newTracing(t)
	tel := tr.telemetry(t, telemetryConfig())
	for i, e := range evs {
		if i == 10 || i == 11 { // two text deltas of the writer's second answer
			continue
		}
		require.NoError(t, tel.Observe(context.Background(), e))
	}
	require.Equal(t, uint64(2), tel.Stats().Lost)
	root := named(tr.exp.GetSpans(), "invoke_workflow review_loop")[0]
	require.Equal(t, "2", attr(root, "spice_orch.telemetry.lost_events"))
	require.Len(t, tr.exp.GetSpans(), 19)

	// Events of no open pair are lost too.
	require.NoError(t, tel.Observe(context.Background(), evs[1]))
	require.Equal(t, uint64(3), tel.Stats().Lost)
}

// TestD3_OpenPairsAreBounded opens more pairs than MaxPairs: the oldest
// is ended as lost, and the count of open pairs never exceeds the bound.
func TestD3_OpenPairsAreBounded(t *testing.T) {
	tr := newTracing(t)
	tel := tr.telemetry(t, telemetry.Config{MaxPairs: 1})
	var started []eventlog.Event
	for _, id := range []string{"pair-a", "pair-b"} {
		cfg := builtinPair(t, nil)
		cfg.ID = id
		var first eventlog.Event
		cfg.Timeline.Required = []eventlog.Observer{eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
			if e.Seq() <= 2 {
				if e.Seq() == 1 {
					first = e
				}
				return tel.Observe(context.Background(), e)
			}
			return nil
		})}
		_, _, err := play(t, context.Background(), cfg)
		require.NoError(t, err)
		started = append(started, first)
		require.Equal(t, 1, tel.Stats().Open)
	}
	require.Equal(t, uint64(1), tel.Stats().Evicted)
	require.Equal(t, "invoke_workflow review_loop ERROR lost\n  invoke_agent writer ERROR lost\n", tree(tr.exp.GetSpans()))
	require.Len(t, started, 2)
}

// TestD3_APairContinuesTheTraceOfItsRequest submits a pair over a real
// HTTP server on loopback with a W3C traceparent header: the pair span is
// a child of the caller's span, in the caller's trace.
func TestD3_APairContinuesTheTraceOfItsRequest(t *testing.T) {
	tr := newTracing(t)
	tel := tr.telemetry(t, telemetryConfig())
	played := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !tel.ContinueRequest(r, pairID) {
			http.Error(w, "no traceparent", http.StatusBadRequest)
			return
		}
		_, _, err := play(t, context.Background(), builtinPair(t, tel))
		played <- err
		w.WriteHeader(http.StatusAccepted)
	}))
	defer srv.Close()
	require.True(t, strings.HasPrefix(srv.URL, "http://127.0.0.1:"))

	const traceID, parentID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/pairs", strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("traceparent", "00-"+traceID+"-"+parentID+"-01")
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusAccepted, resp.StatusCode)
	require.NoError(t, <-played)

	spans := tr.exp.GetSpans()
	root := named(spans, "invoke_workflow review_loop")[0]
	require.Equal(t, traceID, root.SpanContext.TraceID().String())
	require.Equal(t, parentID, root.Parent.SpanID().String())
	require.True(t, root.Parent.IsRemote())
	for _, s := range spans {
		require.Equal(t, traceID, s.SpanContext.TraceID().String())
	}

	// Without a header nothing waits, and the next pair is a root again.
	require.False(t, tel.ContinueRequest(httptest.NewRequest(http.MethodPost, "/v1/pairs", nil), pairID))
}

// TestD3_MetricsAreServedInPrometheusFormat scrapes the Prometheus handler
// over a real HTTP server after a pair.
func TestD3_MetricsAreServedInPrometheusFormat(t *testing.T) {
	prom, err := telemetry.NewPrometheus()
	require.NoError(t, err)
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(prom.Reader))
	defer func() { require.NoError(t, mp.Shutdown(context.Background())) }()
	cfg := telemetryConfig()
	cfg.MeterProvider = mp
	cfg.TracerProvider = noop.NewTracerProvider()
	tel, err := telemetry.New(cfg)
	require.NoError(t, err)
	_, err = tel.ObserveScheduler(func() telemetry.SchedulerStats { return telemetry.SchedulerStats{Queued: 7} })
	require.NoError(t, err)
	_, _, err = play(t, context.Background(), builtinPair(t, tel))
	require.NoError(t, err)

	srv := httptest.NewServer(prom.Handler)
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	text := string(body)
	for _, want := range []string{
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="spice_orch.scripted",gen_ai_request_model="scripted-1",gen_ai_token_type="input"`,
		`gen_ai_client_operation_duration_seconds_bucket{`,
		`spice_orch_pairs_ended_total{gen_ai_workflow_name="review_loop"`,
		`spice_orch_tool_calls_total{gen_ai_tool_name="fs.write"`,
		`spice_orch_scheduler_queue_depth{`,
	} {
		require.Contains(t, text, want)
	}
}
