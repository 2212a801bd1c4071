// Package serve is the composition root of `spice-orch serve`: from a
// Config it opens the store, starts telemetry, a scheduler (or, with
// NATS, the JetStream job backend, starting an embedded NATS server if
// asked), the approval broker, the MCP servers every pair shares (their
// changed tool lists wait for the operator's approval under the
// server's own questions) and a remotespec.Builder for the specs
// clients send, assembles server.Server over them, settles the pairs an
// earlier serve left, listens, offers the example specs and the demo
// pair, and on SIGINT, SIGTERM or the end of its context shuts down so
// that every accepted pair ends in the store before Run returns. It
// writes its messages to the operator to the writers it is given.
//
// It is a sibling of compose, not part of it: compose builds one pair
// from a trusted spec and knows nothing of HTTP, queues or telemetry,
// while serve wires a long-lived server over many pairs and builds each
// of them through remotespec, which uses compose.
//
// It must not parse flags or decide exit codes (a configuration it
// cannot run with is a *ConfigError for the caller to report), decide
// what an untrusted spec may ask for (that is remotespec's), or serve
// HTTP itself (that is server's).
package serve
