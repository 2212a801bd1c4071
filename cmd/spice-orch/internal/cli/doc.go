// Package cli owns the spice-orch command line: the cobra commands (run,
// validate, runs list|show|replay|resume|diff, serve, worker, export-trace,
// plugin digest|describe|pin|conformance|dev, mcp digest|describe,
// version, completion), their flags and help, what they print, and the
// exit codes:
//
//	0    the pair completed (approved, or a relay ran both workers)
//	1    the pair failed, or a command failed (store, I/O)
//	2    bad usage or a bad spec
//	130  the pair was cancelled (Ctrl-C / SIGINT, or SIGTERM)
//
// `run` composes a pair with package compose, starts it, and prints its
// timeline from a Timeline observer of compose, which is told of an event
// only after the store acknowledged it: with --json each event as its
// canonical JSON line (Event.AppendJSON plus "\n", byte for byte what the
// store records), otherwise rendered by package render. Nothing is printed
// that the store does not hold. The first SIGINT or SIGTERM cancels the
// pair, which ends with one pair.cancelled; a second one kills the process
// the default way.
//
// Every readable output shows text from the store, models, tools and
// servers through render.Text or render.Field, so that it never reaches
// the terminal as control sequences.
//
// # Test hook
//
// SPICE_ORCH_PAUSE_AFTER=KIND makes `run` hold the pair, once, right after
// the first timeline event of that kind has been committed (and so can be
// printed), until the process receives SIGINT or SIGTERM, or a minute
// passes. It is a required timeline observer that blocks, nothing more: the
// signal then takes the ordinary cancellation path. It exists so that a
// test can send SIGINT at a known point of a run that otherwise finishes
// in milliseconds. It is not shown in --help.
//
// The wiring behind the commands lives in packages of its own: compose
// builds one pair from a spec, remotespec decides what a spec that
// arrived over HTTP or as a job may ask for, serve and jobworker are the
// composition roots of `serve` and `worker`, otelsetup builds the
// OpenTelemetry providers from --otel and the environment, and pluginlog
// and mcplog are the schemas of the plugin and MCP logs kept beside each
// pair timeline. This package turns flags into their configurations and
// their errors into exit codes. What it still composes itself is `run`'s
// own sequence (store, recipe, plugin and MCP logs, pauses, resume), the
// loop of `plugin dev` (whose --serve is a serve given the active build),
// and how `run` answers approval questions from the terminal or
// --approve-from (approve.go).
//
// The package must not reach below the packages it composes: building a
// pair is compose's, decoding a spec is spec's, drawing a timeline is
// render's, recording is the store's, serving HTTP is server's, and
// running jobs is the scheduler's or jetstream's. It must not know a
// provider's wire format or run a tool itself.
package cli
