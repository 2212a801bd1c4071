// Package pairdiff compares two recorded timelines, event by event, and
// reports the first divergence: where it is, a few events of context on
// each side, and which fields differ (kind, worker, payload fields).
//
// A timeline is read as canonical JSON lines, one event a line, as a pair
// timeline, a run log, `spice-orch run --json` and `runs replay --json`
// write them: {"seq":N,"kind":…,"time":…,"payload":{…}}. By default times
// and identifiers (every "time", "seq" and "id" field and every field
// whose name ends in "_id") are left out of the comparison, so that two
// runs of the same pair on different clocks and ID sources match; Exact
// compares every byte that was recorded.
//
// The package reads JSON only; of the kernel it uses only the bound on an
// event's size, for its line bound. It knows no pair, worker or kernel
// type: the CLI (`runs diff`) and tests (package pairtest) share it, and
// so can any reader of a recorded timeline. Of the pair timeline's schema
// (orchestrator's schema.go) it knows two names, spelled here because
// orchestrator is a layer above: a relayed event's "worker" and its
// inner "payload", whose "name" labels a tool event.
package pairdiff
