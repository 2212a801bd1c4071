package otelsetup

import (
	"bytes"
	"context"
	"io"
	"os"

	"github.com/spice-orch/spice-orch/telemetry"
)

// WriteTraceFile draws the recorded timeline in lines as a trace and
// writes it to path as OTLP JSON, with the resource 'run --otel' gives
// it, replacing path only once the whole trace is written. A setting
// telemetry does not understand is a *UsageError.
func WriteTraceFile(ctx context.Context, env Env, lines io.Reader, path string, rec telemetry.Record) error {
	var buf bytes.Buffer
	getenv := func(k string) string {
		switch k {
		case "OTEL_TRACES_EXPORTER":
			return "console"
		case "OTEL_SDK_DISABLED":
			return ""
		}
		return env.Getenv(k)
	}
	ps, err := telemetry.Setup(ctx, telemetry.SetupOptions{Getenv: getenv, ServiceVersion: env.Version, Console: &buf})
	if err != nil {
		return &UsageError{Err: err}
	}
	cfg := ps.Config()
	cfg.Providers = rec.Providers
	tel, err := telemetry.New(cfg)
	if err != nil {
		_ = ps.Shutdown(ctx)
		return &UsageError{Err: err}
	}
	tel.ContinueRecord(ctx, rec)
	rerr := tel.ReplayJSON(ctx, lines)
	if err := ps.Shutdown(context.Background()); err != nil {
		return err
	}
	if rerr != nil {
		return rerr
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}
