// Package id owns the kernel's identifier types and the injected source that
// allocates them.
//
// Each kind of identifier is its own string type so that a turn ID cannot be
// passed where a run ID is expected. Identifiers are short, printable and
// bounded (bound.MaxIDBytes); Parse functions validate text that comes from
// outside (providers, snapshots, clients).
//
// The engine never invents identifiers itself: it asks a Source, which a host
// injects. Counter is a deterministic Source for tests and replays (K30).
package id
