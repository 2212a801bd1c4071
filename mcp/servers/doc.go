// Package servers offers the tools of configured MCP servers, beside the
// compiled tools, as a plan.Source of generations (package toolgen, the
// same machinery as the plugin host's).
//
// A server's verified tool set is a generation. When the server says its
// list changed (tools/list_changed), the tools are listed again and
// verified as at connection (client.Server.Relist): a verified list
// becomes a candidate activated for future leases only, and a refused one
// (a changed definition under a pinned digest, a list over the bounds)
// leaves the active generation serving. Reconnect makes a candidate from
// a fresh connection the same way. A pair holding a lease keeps the tool
// set of its plan; a superseded generation drains: it refuses new calls
// once no lease holds it, waits, bounded, for the calls in flight, and the
// connection it shares with newer generations ends with the last of them.
// Config.Approve, when set, must approve a candidate whose definitions
// changed before it is activated (an operator's approval under serve).
//
// It must not know about runs, engines or pairs, nor about MCP beyond
// what mcp/client offers.
package servers
