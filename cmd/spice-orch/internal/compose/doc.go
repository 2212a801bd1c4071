// Package compose is the composition root of one pair: from a validated
// spec it builds, with plain constructors, everything one pair needs —
// the compiled tools confined to the workspace, or a plugins/host.Source
// serving them with the spec's pinned plugins; the spec's MCP servers as
// an mcp/servers source of the pair's own, and the MCP servers a server
// connects once for all its pairs (SharedMCP, Options.SharedMCP), each
// source joined with the rest by toolgen.Join into the pair's plans; a
// provider per worker (scripted or OpenAI-compatible, decorated by
// providers/coalesce so that a worker that falls behind records the text
// deltas at hand as one event), both workers' engines with unique IDs, the handoff policy, the limits, the approval
// policy with its broker, and the injected store as a required observer
// of every run log and of the pair timeline, ahead of the timeline's
// other observers — and hands back a Pair whose orchestrator.Config is
// ready to start.
//
// `run` uses it directly; `serve` and `worker` (packages serve and
// jobworker, the composition roots of those commands) use it through
// remotespec, which decides first what an untrusted spec may ask for.
//
// It must not parse flags, read files other than through the packages it
// composes, print, or decide exit codes; the environment reaches it only
// through an injected getenv. Running the pair is the caller's business.
package compose
