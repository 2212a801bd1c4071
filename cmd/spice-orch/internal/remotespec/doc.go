// Package remotespec builds pairs from specs the operator did not write:
// a spec sent to serve over HTTP, or a job's spec that a worker plays.
// Such a spec is untrusted, and Builder refuses, with a
// *server.RequestError naming the field and its line, a spec that names
// a workspace (the server gives each pair its own), launches plugins or
// MCP servers, uses provider openai unless the operator allowed it, or
// points a worker at another server with a base_url. What it accepts it
// composes with package compose, under the operator's approval policy
// unless the spec sets its own, with the store as the first timeline
// observer, and writes the pair's trace record beside the timeline. The
// operator may add a plugin to every pair (the active build of `plugin
// dev --serve`) and MCP servers every pair shares (`serve --mcp`); of
// those it records in each pair's MCP log the generations the pair was
// built with. It gives the server what it may show of the spec (its JSON
// without secrets) and a redaction of this process's OpenAI key from
// what the pair shows. It can pace an all-scripted pair so that a person
// can watch it play.
//
// It must not parse flags, print, decide exit codes, open the store, the
// MCP servers or the plugin, or run the pair: the caller hands it what
// it opened and starts what it built.
package remotespec
