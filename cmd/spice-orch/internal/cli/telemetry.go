package cli

import (
	"errors"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
)

// otelEnv is what the telemetry setup reads of env.
func otelEnv(env Env) otelsetup.Env {
	return otelsetup.Env{Getenv: env.Getenv, Stderr: env.Stderr, Version: version()}
}

// otelErr gives an error of the telemetry setup its exit code: a setting
// it does not understand is bad usage, anything else a failure.
func otelErr(err error) error {
	var ue *otelsetup.UsageError
	if errors.As(err, &ue) {
		return usageErr(ue.Err)
	}
	return failed(err)
}
