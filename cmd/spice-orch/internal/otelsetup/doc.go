// Package otelsetup wires OpenTelemetry into the spice-orch commands: it
// builds the providers from the OTEL_* environment for a command with
// --otel, draws one pair's trace and metrics with a telemetry.Telemetry
// (run, runs export-trace), writes a pair's trace record beside its
// timeline, and for serve shares one set of providers among the pairs,
// serves Prometheus metrics, registers the scheduler gauges and continues
// a request's traceparent. Shutdown flushes within ShutdownTimeout and
// says on stderr what could not be sent.
//
// A setting it does not understand is a *UsageError. It must not decide
// exit codes, draw anything itself (that is package telemetry's), or
// build, start or record a pair: the caller hands it the pair's config.
package otelsetup
