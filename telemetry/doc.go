// Package telemetry is the OpenTelemetry of runs and pairs: it turns a
// pair timeline (package orchestrator, O7) into one trace per pair and
// into metrics, following the GenAI semantic conventions of
// go.opentelemetry.io/otel/semconv/v1.41.0 (pinned: the last release that
// carries the gen_ai names).
//
// A pair's trace is drawn from its timeline events alone:
//
//	invoke_workflow {pattern}          the pair (gen_ai.conversation.id = pair ID)
//	├── invoke_agent {role}            one per worker run (gen_ai.agent.id =
//	│   │                              pair ID/role, one agent per worker)
//	│   ├── chat {model}               one per model operation (kind CLIENT)
//	│   └── execute_tool {name}        one per tool call
//	└── ...                            each handoff: an event on the pair span,
//	                                   and a link from the next run to the last
//
// A resumed pair's timeline, which starts at its pair.resumed, is drawn
// as a trace of its own whose pair span links to the pair span of the
// pair's first trace; a replay of the whole record draws one trace, in
// which the runs the resume cut off end as interrupted.
//
// Span times are the events' own times and span IDs derive from the pair
// and run IDs (IDGenerator), so a pair replayed from a store (ReplayJSON)
// draws the same trace as it did live. What the timeline does not say is
// read beside it: Instrument wraps a pair's providers to read what they
// say of themselves and of each response (provider name, server, request
// parameters, response ID, model and finish reason, tool descriptions),
// and a Record, kept beside the timeline, gives a replay the provider
// names and the span the pair continued.
//
// The Observer is a best-effort observer of pair timelines (K17, D3): the
// timeline hands it events through a bounded mailbox, so it can never
// block or fail a run; it counts what it could not draw. Attaching none
// costs nothing. Metrics, a Prometheus handler, W3C trace-context
// propagation for a pair submitted over HTTP, and the standard OTEL_*
// environment (Setup) are here too.
//
// The package reads timelines through the orchestrator's exported payload
// types and the kernel's event payloads; it knows nothing of schedulers,
// stores or providers beyond those values, and nothing below it imports
// OpenTelemetry.
package telemetry
