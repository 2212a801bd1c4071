// Package sidelog reads back a log that the command line records beside
// a pair timeline in the store (the plugin log, the MCP log): each
// event's kind, time and JSON payload decoded into the caller's type.
//
// It owns only that decoding. It must not know what a side log holds:
// the logs' names, payload schemas, bounds and recorders are their own
// packages'.
package sidelog
