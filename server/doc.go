// Package server is the HTTP face of a job backend: a JSON API under /v1
// to submit, list, inspect and cancel pairs, each pair's timeline as
// Server-Sent Events and as JSON lines, an OpenAPI 3.1 document, and an
// embedded web UI that draws a pair live, one lane per worker (S1–S3).
//
// # Durable order
//
// A client sees an event only once the store has made it durable. Each
// pair submitted here gets a feed: a required observer of the pair
// timeline that the host places after the store (BuildRequest.Timeline),
// so an event reaches the feed only after the store acknowledged it. The
// feed is a kernel event log with the pair's own sequence numbers, and
// every stream a client reads — live from the feed, or from the store
// once the pair is gone from memory or the server restarted — is the pair
// timeline byte for byte, the bytes `run --json` prints.
//
// # Untrusted input
//
// Every body is bounded; a spec that arrives over HTTP is decoded by the
// host's BuildFunc, which must refuse anything that chooses a place on the
// server's file system: the server gives each pair its own workspace
// under Config.DataDir. Without a token the server serves loopback only,
// refuses Host headers that are not loopback names (DNS rebinding), and
// every state-changing request must pass net/http's cross-origin
// protection and carry a JSON or YAML body type.
//
// The package knows pairs through the scheduler's and the orchestrator's
// public APIs and recorded pairs through the store's read side. It must
// not know how a spec becomes a pair (the host's BuildFunc), any provider
// or tool, or the kernel's engine.
package server
