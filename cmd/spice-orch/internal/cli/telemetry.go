package cli

import (
	"errors"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
)

// otelHelp is the --otel flag's help, shared by the commands that have it.
const otelHelp = "send a trace of the pair (and its metrics) to OpenTelemetry, configured by the OTEL_* environment (see 'spice-orch runs export-trace --help')"

// serveOTelHelp is serve's --otel flag help.
const serveOTelHelp = "send a trace of every pair (and metrics) to OpenTelemetry, configured by the OTEL_* environment as for 'run --otel', " +
	"continue a POST /v1/pairs request's traceparent, and serve Prometheus metrics at /metrics"

// otelEnv is what the telemetry setup reads of env.
func otelEnv(env Env) otelsetup.Env {
	return otelsetup.Env{Getenv: env.Getenv, Stderr: env.Stderr, Version: version()}
}

// otelErr gives an error of the telemetry setup its exit code: a setting
// it does not understand is bad usage, anything else a failure.
func otelErr(err error) error {
	if err == nil {
		return nil
	}
	var ue *otelsetup.UsageError
	if errors.As(err, &ue) {
		return usageErr(ue.Err)
	}
	return failed(err)
}
