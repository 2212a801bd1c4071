// Package sidelog writes and reads back a log that the command line
// records beside a pair timeline in the store (the plugin log, the MCP
// log): a Writer holds events as they are reported and records them,
// within a bound, at the flush points its caller chooses; Read decodes
// each recorded event's kind, time and JSON payload and makes the
// caller's type of them, so that each log keeps its own typed events.
//
// It must not know what a side log holds: the logs' names, payload
// schemas and bounds are their own packages'.
package sidelog
