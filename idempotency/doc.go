// Package idempotency owns the idempotency key of a tool call: a value
// derived from the pair, run and call IDs that names one call for good, the
// same however often the call is delivered or its pair resumed (R5), and
// the context plumbing that carries it from whoever knows those IDs (the
// orchestrator) to whatever runs the call (a compiled tool, or the
// plugin host and the MCP client, which pass it on to a plugin or an MCP
// server) without any change to the kernel's tool contract.
//
// It must not know about pairs' workings, tools, plugins or transports: it
// holds the key's derivation, its syntax and its place in a context.
package idempotency
