// Package message owns the provider-neutral conversation values: roles,
// parts and messages (K1, K2).
//
// A Message is an immutable role plus a bounded list of parts. A Part is a
// small tagged union (text, tool call or tool result) held by value, so a
// message costs one allocation for its parts and none for the union itself.
// Constructors validate every bound in kernel/bound and copy their inputs;
// accessors hand out values and iterators, never the internal slice.
//
// The system prompt is not a message: it is a field of a model request.
//
// This package must not know about providers, wire formats, streams, runs or
// events; it only says what a valid message is.
package message
