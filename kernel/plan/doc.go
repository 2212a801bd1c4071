// Package plan owns execution plans and the leases that pin one to a run
// (K11–K14).
//
// A Plan is an immutable set of tool definitions together with the
// dispatcher that runs them. It is named by a non-reusable ID and identified
// by a Fingerprint over every complete tool contract, so two plans that
// differ in any description, schema, effect, replay safety or capability
// have different fingerprints. Identity (ID plus Fingerprint) is the small
// value that snapshots and events carry, and Plan.Matches checks it.
//
// A Source hands out Leases, either on its current plan or on an exact plan
// ID. Memory is an in-memory Source: activating a plan affects only later
// leases, and a run keeps the plan it leased. A Lease is released exactly
// once; the wait for the source's release callback is bounded, and a
// callback that fails, panics or does not return in time becomes a typed
// *ReleaseError that the caller turns into the run's failed terminal.
//
// This package must not know about runs, turns, events, messages, providers,
// snapshot encodings or any concrete tool: it sees only tool.Definition and
// tool.Dispatcher.
package plan
