// Package mcplog owns the MCP log of a pair: a log of its own in the
// store, named Name(pairID), beside the pair timeline, that records the
// generation events of the pair's MCP servers under their kinds
// (plan.activated, candidate.failed, generation.draining,
// generation.drained, generation.forced). A pair of `serve --mcp`, whose
// servers are shared, has one plan.leased event instead: the generations
// of the shared servers its plan was built with. Every event says whether
// the server's code is pinned (a streamable-HTTP server's is not); a
// plan.activated names the plan of the MCP servers and each generation's
// tools, so that the plan ID of a run.started leads to them through the
// pair's joined plan.
//
// It owns the log's name, its payload schema (Event, Generation, Tool)
// and its bound, the Recorder that holds the servers' events and appends
// them at flush points, and Read, which reads a recorded log back.
//
// It must not change the pair timeline's kinds or bytes, connect to or
// manage MCP servers (that is mcp/servers'), print, or decide exit codes:
// how `runs show` draws the log is the command line's.
package mcplog
