// Package eventlog owns the generic, strictly sequenced, bounded event log:
// sequence assignment, retention and eviction, required and best-effort
// observers, replay-then-tail subscriptions, health stats, and the canonical
// JSON envelope of an event together with its strict decoder (K15–K20).
//
// The log knows nothing about runs, turns, tools or any concrete event kind.
// A kind is an opaque name and a payload is anything that can report its exact
// encoded size and append its canonical JSON; kernel/event defines the run
// taxonomy, and code outside the kernel may define its own kinds and reuse the
// log unchanged.
//
// Payloads are encoded lazily: Append asks only for the encoded length (for
// the byte bound) and bytes are produced when a subscriber, observer or store
// asks for them. Object and ObjectReader help payload authors write and read
// canonical JSON by hand, without reflection. ObjectReader is strict: a
// string that is not valid UTF-8, or escapes a lone surrogate, is refused
// with a reason rather than repaired, which encoding/json (it substitutes
// U+FFFD) cannot say; hence its own unescaper. An adapter that must repair
// what a server sends keeps its own.
//
// The log never reads a clock: the caller supplies every event's time.
package eventlog
