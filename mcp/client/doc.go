// Package client connects to one MCP server and offers its tools as
// ordinary kernel tool.Tool values, on the official MCP Go SDK.
//
// A stdio server is pinned like a plugin: an absolute path and the SHA-256
// of what is executed, and for an interpreted server also the entry file
// and the dependency lock file. Connect refuses a relative path and any
// drift, runs the verified open file (not the path), passes only the
// arguments and environment the Config names, and starts the server with
// package proctree, as the plugin host does: in a new PID namespace when
// the system allows it, else in its own process group. Close ends the
// whole process tree, a descendant that left the group for its own
// session included. A Node server runs a private copy of its verified
// entry, handed to Node by a module hook in the entry's place.
//
// A streamable-HTTP server is reached by a loopback or HTTPS URL. Its code
// cannot be pinned: Server.Pinned reports false, and its tools are
// mutating and replay-unsafe unless the operator declares otherwise.
// Config.OAuth, when set, authorizes its requests (the SDK's OAuth flow).
//
// Each tool definition (name, description, input schema, annotations) has
// a digest; a Config may pin it, and a server that lists another
// definition under a pinned name is refused. Effect and replay safety come
// from the operator's declaration; without one, annotations of a pinned
// server are read conservatively, and otherwise a tool is mutating and
// replay-unsafe. Info says where each value came from.
//
// Failures become the kernel's typed outcomes (K7): before the request
// left the client, definitive; after it, uncertain for a mutating tool and
// never retried; a call in flight ends as soon as a stdio server's
// process exits, though a descendant may still hold its stdout open. A
// result with isError is a model-visible problem. A cancelled call sends
// notifications/cancelled (stdio) or closes its stream (HTTP) and ends
// with one outcome. A call whose context carries
// an idempotency key (package idempotency) sends it in the request's
// _meta under MetaIdempotencyKey, so that a server can refuse to apply a
// call twice.
//
// It must not know about plans, runs, engines or pairs: the caller composes
// the tools into a plan.
package client
