package telemetry_test

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"

	"github.com/spice-orch/spice-orch/telemetry"
)

func getenv(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

// TestD3_SetupReadsTheStandardEnvironment builds providers from OTEL_*
// settings without sending anything: console traces are OTLP JSON on the
// given writer, none and a disabled SDK build nothing, gRPC and
// Prometheus build, and an exporter this build lacks is ErrUnsupported.
func TestD3_SetupReadsTheStandardEnvironment(t *testing.T) {
	ctx := context.Background()
	var console bytes.Buffer
	ps, err := telemetry.Setup(ctx, telemetry.SetupOptions{
		Getenv:  getenv("OTEL_TRACES_EXPORTER", "console", "OTEL_METRICS_EXPORTER", "none"),
		Console: &console, Metrics: true,
	})
	require.NoError(t, err)
	require.NotNil(t, ps.Tracer)
	require.Nil(t, ps.Meter)
	tel, err := telemetry.New(ps.Config())
	require.NoError(t, err)
	_, _, err = play(t, ctx, builtinPair(t, tel))
	require.NoError(t, err)
	require.NoError(t, ps.Shutdown(ctx))
	require.Equal(t, 1, strings.Count(console.String(), "\n"))
	require.Contains(t, console.String(), `{"key":"service.name","value":{"stringValue":"spice-orch"}}`)
	require.Contains(t, console.String(), `"name":"invoke_workflow review_loop"`)

	for _, env := range [][]string{{"OTEL_SDK_DISABLED", "true"}, {"OTEL_TRACES_EXPORTER", "none"}} {
		ps, err := telemetry.Setup(ctx, telemetry.SetupOptions{Getenv: getenv(env...)})
		require.NoError(t, err)
		require.Nil(t, ps.Tracer, env)
		require.NoError(t, ps.Shutdown(ctx))
	}

	ps, err = telemetry.Setup(ctx, telemetry.SetupOptions{
		Getenv: getenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc", "OTEL_METRICS_EXPORTER", "none"), Prometheus: true})
	require.NoError(t, err)
	require.NotNil(t, ps.Tracer)
	require.NotNil(t, ps.Meter)
	require.NotNil(t, ps.Prometheus)
	// Nothing was drawn, so nothing waits for a collector.
	shut, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	require.NoError(t, ps.Shutdown(shut))

	for _, env := range [][]string{
		{"OTEL_TRACES_EXPORTER", "zipkin"},
		{"OTEL_TRACES_EXPORTER", "console"}, // without a Console writer
		{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json"},
	} {
		_, err := telemetry.Setup(ctx, telemetry.SetupOptions{Getenv: getenv(env...)})
		require.ErrorIs(t, err, telemetry.ErrUnsupported, env)
	}
	_, err = telemetry.Setup(ctx, telemetry.SetupOptions{Metrics: true,
		Getenv: getenv("OTEL_TRACES_EXPORTER", "none", "OTEL_METRICS_EXPORTER", "statsd")})
	require.ErrorIs(t, err, telemetry.ErrUnsupported)
}

// TestD3_TheResourceAndTheConsole: the resource carries the Required
// telemetry.sdk.* attributes, and the console exporter writes a pair as
// soon as its pair span ends, not at shutdown.
func TestD3_TheResourceAndTheConsole(t *testing.T) {
	ctx := context.Background()
	var console bytes.Buffer
	ps, err := telemetry.Setup(ctx, telemetry.SetupOptions{
		Getenv:  getenv("OTEL_TRACES_EXPORTER", "console", "OTEL_METRICS_EXPORTER", "none"),
		Console: &console,
	})
	require.NoError(t, err)
	tel, err := telemetry.New(ps.Config())
	require.NoError(t, err)
	for range 2 {
		cfg := builtinPair(t, nil)
		tel.Instrument(&cfg)
		_, _, err = play(t, ctx, cfg)
		require.NoError(t, err)
	}
	// Play closed each timeline and waited for its observer: each pair
	// span has ended, and each pair is a line of its own.
	out := console.String()
	require.Equal(t, 2, strings.Count(out, "\n"))
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		require.Equal(t, 19, strings.Count(l, `"startTimeUnixNano"`))
		for _, key := range []string{"telemetry.sdk.name", "telemetry.sdk.language", "telemetry.sdk.version"} {
			require.Contains(t, l, `{"key":"`+key+`","value":{"stringValue":"`)
		}
	}
	require.NoError(t, ps.Shutdown(ctx))
	require.Equal(t, out, console.String(), "nothing was held for shutdown")
}

// TestD3_AnUnreachableCollectorIsShutdownsError: an export that fails is
// not handed to the SDK's global error handler (its own log line); the
// first failure is what Shutdown returns.
func TestD3_AnUnreachableCollectorIsShutdownsError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+addr)
	t.Setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "2000")
	var handled atomic.Int32
	prev := otel.GetErrorHandler()
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(error) { handled.Add(1) }))
	defer otel.SetErrorHandler(prev)

	ctx := context.Background()
	ps, err := telemetry.Setup(ctx, telemetry.SetupOptions{Getenv: getenv("OTEL_METRICS_EXPORTER", "none")})
	require.NoError(t, err)
	tel, err := telemetry.New(ps.Config())
	require.NoError(t, err)
	_, _, err = play(t, ctx, builtinPair(t, tel))
	require.NoError(t, err)
	err = ps.Shutdown(ctx)
	require.Error(t, err)
	require.Contains(t, err.Error(), "exports failed, the first:")
	require.Zero(t, handled.Load())
}
