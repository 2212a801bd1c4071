//go:build unix

package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/telemetry"
)

// lockedBuffer is a stderr that serve's goroutines may share.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// spanSink keeps every span in memory and hands on each pair's root span
// as it ends; it remembers that it was shut down.
type spanSink struct {
	*tracetest.InMemoryExporter
	roots    chan tracetest.SpanStub
	shutdown atomic.Bool
}

func newSpanSink() *spanSink {
	return &spanSink{InMemoryExporter: tracetest.NewInMemoryExporter(), roots: make(chan tracetest.SpanStub, 8)}
}

func (s *spanSink) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	// Kept first, so a test handed a root finds it among the spans.
	err := s.InMemoryExporter.ExportSpans(ctx, spans)
	for _, sp := range spans {
		if strings.HasPrefix(sp.Name(), "invoke_workflow ") {
			select {
			case s.roots <- tracetest.SpanStubFromReadOnlySpan(sp):
			default:
			}
		}
	}
	return err
}

// Shutdown keeps the spans (the in-memory exporter's own forgets them).
func (s *spanSink) Shutdown(context.Context) error { s.shutdown.Store(true); return nil }

func (s *spanSink) root(t *testing.T) tracetest.SpanStub {
	t.Helper()
	select {
	case r := <-s.roots:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no pair was drawn within a minute")
		return tracetest.SpanStub{}
	}
}

// otelServe is `serve` run in-process on a random loopback port.
type otelServe struct {
	url, token string
	sink       *spanSink
	stderr     *lockedBuffer
	mu         sync.Mutex
	built      []*orchestrator.Config
	stop       func() error
}

// startOTelServe runs serve with the given --otel and token. Its OTEL_*
// environment turns the exporters off, so that only the test's are there:
// with --otel the real setup builds the providers (and the Prometheus
// reader /metrics serves) and the test adds an in-memory span exporter.
func startOTelServe(t *testing.T, otel bool, token string, vars map[string]string) *otelServe {
	t.Helper()
	dir := t.TempDir()
	s := &otelServe{token: token, sink: newSpanSink(), stderr: &lockedBuffer{}}
	ready := make(chan string, 1)
	hooks := serveHooks{
		ready: func(url string) { ready <- url },
		built: func(cfg *orchestrator.Config) { s.mu.Lock(); s.built = append(s.built, cfg); s.mu.Unlock() },
		setup: func(ctx context.Context, env otelsetup.Env, o telemetry.SetupOptions) (*telemetry.Providers, error) {
			ps, err := otelsetup.Setup(ctx, env, o)
			if err != nil {
				return nil, err
			}
			ps.Tracer = sdktrace.NewTracerProvider(sdktrace.WithSyncer(s.sink), sdktrace.WithIDGenerator(telemetry.IDGenerator()))
			return ps, nil
		},
	}
	f := serveFlags{addr: "127.0.0.1:0", store: filepath.Join(dir, "runs.db"), dataDir: filepath.Join(dir, "data"),
		token: token, pairs: 2, queue: 4, maxConns: 16, otel: otel}
	env := Env{Stdout: io.Discard, Stderr: s.stderr, Getenv: func(k string) string { return vars[k] }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServe(ctx, env, f, hooks) }()
	select {
	case s.url = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("serve ended before it listened: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("serve did not listen within a minute")
	}
	var once sync.Once
	var stopErr error
	s.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(time.Minute):
				stopErr = errors.New("serve did not stop within a minute")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { require.NoError(t, s.stop()) })
	return s
}

// otelVars turns the exporters the environment would build off.
var otelVars = map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_METRICS_EXPORTER": "none"}

func (s *otelServe) do(t *testing.T, method, path, body string, header map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

func (s *otelServe) submit(t *testing.T, header map[string]string) string {
	t.Helper()
	h := map[string]string{"Authorization": "Bearer " + s.token}
	for k, v := range header {
		h[k] = v
	}
	status, body := s.do(t, "POST", "/v1/pairs", serve.BuiltinYAML(), h)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	return created.ID
}

func attr(s tracetest.SpanStub, key string) string {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}

// TestD3_ServeContinuesTheTraceOfATraceparent: a pair posted with a W3C
// traceparent draws its whole trace (the built-in pair's 19 spans) in the
// caller's trace, its invoke_workflow span a child of the caller's remote
// span; a pair posted without one starts a trace of its own. Each pair
// gets the telemetry observer as a best-effort observer, and serve shuts
// the exporter down when it stops.
func TestD3_ServeContinuesTheTraceOfATraceparent(t *testing.T) {
	s := startOTelServe(t, true, "t0ken-for-the-test", otelVars)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	pairID := s.submit(t, map[string]string{"traceparent": tp})
	root := s.sink.root(t)
	tid, err := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	require.NoError(t, err)
	sid, err := trace.SpanIDFromHex("00f067aa0ba902b7")
	require.NoError(t, err)
	require.Equal(t, "invoke_workflow review_loop", root.Name)
	require.Equal(t, pairID, attr(root, "gen_ai.conversation.id"))
	require.True(t, root.Parent.IsRemote())
	require.Equal(t, tid, root.Parent.TraceID())
	require.Equal(t, sid, root.Parent.SpanID())
	require.Equal(t, tid, root.SpanContext.TraceID())

	spans := s.sink.GetSpans()
	require.Len(t, spans, 19)
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, sp := range spans {
		require.Equal(t, tid, sp.SpanContext.TraceID(), sp.Name)
		byID[sp.SpanContext.SpanID()] = sp
	}
	for _, sp := range spans {
		if sp.Name == root.Name {
			continue
		}
		_, ok := byID[sp.Parent.SpanID()]
		require.True(t, ok, "%s hangs below the pair", sp.Name)
		if strings.HasPrefix(sp.Name, "chat ") {
			require.Equal(t, "spice_orch.scripted", attr(sp, "gen_ai.provider.name"))
		}
	}

	s.sink.Reset()
	s.submit(t, nil)
	own := s.sink.root(t)
	require.False(t, own.Parent.IsValid(), "without a traceparent the pair is a root")
	require.NotEqual(t, tid, own.SpanContext.TraceID())

	s.mu.Lock()
	for _, cfg := range s.built {
		require.Len(t, cfg.Timeline.BestEffort, 1)
		require.IsType(t, (*telemetry.Telemetry)(nil), cfg.Timeline.BestEffort[0])
		require.GreaterOrEqual(t, cfg.Timeline.Mailbox, telemetry.Mailbox)
	}
	require.Len(t, s.built, 2)
	s.mu.Unlock()
	require.NoError(t, s.stop())
	require.True(t, s.sink.shutdown.Load(), "serve shuts telemetry down when it stops")
	require.Empty(t, s.stderr.String())
}

// TestD3_ServeMetricsNeedTheTokenAndShowThePair: with --otel, /metrics
// answers 401 without the API's token (or with a wrong one) and, with it,
// the Prometheus text of a pair that has ended: token usage by provider,
// pairs ended, tool calls and the scheduler gauges.
func TestD3_ServeMetricsNeedTheTokenAndShowThePair(t *testing.T) {
	s := startOTelServe(t, true, "t0ken-for-the-test", otelVars)
	s.submit(t, nil)
	s.sink.root(t)

	status, _ := s.do(t, "GET", "/metrics", "", nil)
	require.Equal(t, http.StatusUnauthorized, status)
	status, _ = s.do(t, "GET", "/metrics", "", map[string]string{"Authorization": "Bearer wrong"})
	require.Equal(t, http.StatusUnauthorized, status)
	status, text := s.do(t, "GET", "/metrics", "", map[string]string{"Authorization": "Bearer " + s.token})
	require.Equal(t, http.StatusOK, status, text)
	for _, want := range []string{
		`gen_ai_client_token_usage_count{gen_ai_operation_name="chat",gen_ai_provider_name="spice_orch.scripted",gen_ai_request_model="scripted-1",gen_ai_token_type="input"`,
		`gen_ai_client_token_usage_bucket{`,
		`gen_ai_client_operation_duration_seconds_bucket{`,
		`spice_orch_pairs_ended_total{gen_ai_workflow_name="review_loop"`,
		`spice_orch_tool_calls_total{gen_ai_tool_name="fs.write"`,
	} {
		require.Contains(t, text, want)
	}
	for _, gauge := range []string{"spice_orch_scheduler_queue_depth", "spice_orch_scheduler_pairs_running", "spice_orch_scheduler_model_operations_active"} {
		require.Regexp(t, regexp.MustCompile(`(?m)^# TYPE `+gauge+` gauge$`), text)
		require.Regexp(t, regexp.MustCompile(`(?m)^`+gauge+`(\{[^}]*\})? \d+$`), text)
	}
	require.Regexp(t, regexp.MustCompile(`(?m)^spice_orch_scheduler_queue_depth(\{[^}]*\})? 0$`), text)
	require.NotContains(t, text, s.token)
}

// TestD3_ServeWithoutOTelAttachesNothing: without --otel the OTEL_*
// environment is never read (a setting serve --otel refuses is harmless),
// no pair gets an observer beyond the server's own, and there is no
// /metrics; with --otel the same setting is a usage error before serve
// listens.
func TestD3_ServeWithoutOTelAttachesNothing(t *testing.T) {
	bad := map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}
	s := startOTelServe(t, false, "", bad)
	pairID := s.submit(t, nil)
	status, body := s.do(t, "GET", "/v1/pairs/"+pairID+"/events.jsonl", "", nil)
	require.Equal(t, http.StatusOK, status)
	require.Contains(t, body, `"kind":"pair.completed"`)
	s.mu.Lock()
	require.Len(t, s.built, 1)
	require.Empty(t, s.built[0].Timeline.BestEffort)
	require.Zero(t, s.built[0].Timeline.Mailbox)
	s.mu.Unlock()
	status, _ = s.do(t, "GET", "/metrics", "", nil)
	require.Equal(t, http.StatusNotFound, status)
	require.NoError(t, s.stop())
	require.Empty(t, s.stderr.String())
	require.False(t, s.sink.shutdown.Load())

	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	err := runServe(ctx, Env{Stdout: io.Discard, Stderr: io.Discard, Getenv: func(k string) string { return bad[k] }},
		serveFlags{addr: "127.0.0.1:0", store: filepath.Join(dir, "runs.db"), pairs: 1, queue: 1, maxConns: 1, otel: true},
		serveHooks{ready: func(string) { t.Error("serve listened with a bad OTEL_* setting"); cancel() }})
	var xe *exitError
	require.ErrorAs(t, err, &xe)
	require.Equal(t, ExitUsage, xe.code)
	require.Contains(t, err.Error(), "otel_traces_exporter")
}
