// Package model owns the contract between the engine and a model provider:
// the immutable request (K1, K2), the stream of items a provider answers
// with as a strict tagged union (K23), usage, optional provider metadata
// (K3), the typed errors a provider returns, and the Assembler that both the
// engine and providers use to hold a stream to its rules.
//
// This package must not know any provider's wire format, any HTTP client,
// runs, turns, events or how the engine reacts to a failure; it only says
// what a valid request, stream and response are.
package model
