// Package coalesce owns one decorator of a model.Provider: a stream whose
// caller fell behind returns the text deltas the model already sent as one
// text delta, so that the caller records one event for them instead of one
// per chunk. A caller that keeps up sees every item exactly as the inner
// stream returns it.
//
// # The optional method
//
// A stream takes part by implementing Readier:
//
//	Ready() bool
//
// Ready reports whether the next Recv returns without waiting for the
// model. It must be cheap, must never block, and must never report true
// when the next Recv would wait (for the network, a timer, another
// goroutine). Reporting false when an item is in fact at hand is allowed:
// the item is then returned on its own.
//
// # Merging
//
// Recv returns the inner stream's next item. When it is a text delta, and
// for as long as the inner stream is Ready, Recv receives the next item too:
// consecutive text deltas are concatenated into one model.TextDelta of at
// most bound.MaxTextDeltaBytes. The first item that does not join the merge
// (a tool call, a terminal, a text delta that would exceed the bound, an
// error, io.EOF, a panic) is held and returned, or raised, by the next Recv.
// So nothing is lost, reordered or duplicated, and the concatenated text of
// the stream, its tool calls, its terminal and its errors are exactly the
// inner stream's.
//
// A stream without Ready is returned as it is: no wrapper, no change in its
// items. Errors from Provider.Stream are returned as they are, so their
// retry advice is kept. No goroutine is started. The decorated provider's
// Unwrap returns the inner one, so that what reads a provider's optional
// methods (its name, its server) can look through the decorator.
//
// This package knows the kernel's model contract and nothing else: not
// which provider it wraps, not how the items it returns are recorded or
// shown, and not why a caller fell behind.
package coalesce
