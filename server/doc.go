// Package server is the HTTP face of a job backend — the in-process
// scheduler, or a queue of workers such as the JetStream backend: a JSON API under /v1 to submit, list, inspect and
// cancel pairs and to answer their approval questions, each pair's
// timeline as Server-Sent Events and as JSON lines, an OpenAPI 3.1
// document, a login page for token holders, an optional /metrics handler
// the host supplies, and an embedded web UI that draws a pair live, one
// lane per worker (S1–S3).
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
// # Accepted pairs
//
// A 201 is durable: the submission is synced to a journal file under
// Config.DataDir before the answer, and removed once the pair's terminal
// is in the store. Every accepted pair ends with one terminal there: one
// cancelled before it started (while queued, or by the host's Scheduler
// Shutdown) is played as cancelled from pair.started on, and Recover does
// the same for the journal a killed server left. Close waits for all of
// it, and lets streams of a feed end with their pair's terminal and
// end. A pair another process records into the same store is followed
// from the store, and cannot be cancelled here.
//
// # Pairs played elsewhere
//
// With a Queue instead of a Scheduler (Config.Queue) the server plays no
// pair: it checks a spec with the host's BuildFunc, submits the spec
// under the new pair's ID, and serves every pair from Config.Store, a
// History that the SQLite store and the JetStream backend both
// implement. The queue's acknowledgement makes the 201 durable.
//
// A queue (or history) that can lose its link implements job.Monitor:
// GET /v1/health reports it, as JSON or pushed as events to the page's
// banner, and while it is down every call that needs it is a 503
// backend_unavailable at once, while open streams wait for it.
//
// # Untrusted input
//
// Every body is bounded; a spec that arrives over HTTP is decoded by the
// host's BuildFunc, which must refuse anything that chooses a place on the
// server's file system: the server gives each pair its own workspace
// under Config.DataDir. Without a token the server serves loopback only,
// refuses Host headers that are not loopback names (DNS rebinding), and
// every state-changing request must pass net/http's cross-origin
// protection and carry a JSON or YAML body type. Every read is bounded
// (HTTPServer, and a body deadline in the handler); a refusal is answered
// without reading the body and closes the connection; and a
// LimitListener makes room by closing connections that never made a
// request the server let through, so clients without the token cannot
// hold every connection.
//
// The package knows pairs through the scheduler's and the orchestrator's
// public APIs, a queue through package job, and recorded pairs through
// History, whose values are the store's read-side types. It must
// not know how a spec becomes a pair (the host's BuildFunc), any provider
// or tool, or the kernel's engine.
package server
