// Package event owns the run event taxonomy: the kinds a run's log holds
// (run, turn, model operation, tool operation and interaction, each with a
// start and its terminals, plus model text deltas and tool progress), one
// typed, immutable payload per kind with its canonical JSON, and strict
// decoding of those payloads from outside bytes.
//
// It builds on kernel/eventlog, which knows nothing about these kinds; it
// does not know about the engine that emits them, nor about any store or
// client that reads them. Payload fields hold only strings, numbers, IDs
// and problems, so a payload cannot change after the log has stored it.
//
// Canonical form: fields in the order of the struct, no whitespace;
// optional strings and problems are omitted when empty; numbers and
// booleans are always written.
package event
