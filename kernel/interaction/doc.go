// Package interaction owns UI-neutral questions put to a person or client
// during a run, the answers that come back, and the Broker interface the
// host injects to carry them (K28).
//
// It must not know how a question is shown (terminal, web page, chat) or
// who answers it. The engine gives every interaction exactly one terminal:
// answered, failed (broker error, invalid answer, panic, observer error) or
// cancelled.
package interaction
