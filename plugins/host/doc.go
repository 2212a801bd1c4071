// Package host launches one plugin/v1 process, verifies it, and offers its
// tools as ordinary kernel tool.Tool values (plugins/PROTOCOL.md).
//
// Launch refuses a relative path and a pin that does not match. A pin
// covers the executable and, for an interpreted plugin, the files it
// loads (Config.Root and Config.Files). Launch copies all of them into the
// launch's private directory, closes the copies, hashes them and executes
// only the copy, so the bytes executed are the bytes verified whatever
// another process writes to the pinned files meanwhile. Every launch gets
// a fresh secret on stdin; the handshake line on stdout must come first
// and prove the secret; every call proves it back. The manifest is
// checked against the kernel's tool contracts (K4, K5) and the host's
// bounds, which a manifest can only lower, before any tool is handed out.
//
// # The process tree
//
// Stopping a plugin ends its whole process tree, including a descendant
// that left the process group and its session (setsid), which would
// otherwise keep the plugin's pipes open and outlive it. The plugin
// starts as the first process of its own PID namespace where the system
// allows it (a user namespace mapping the host's own IDs makes that work
// without privileges where user namespaces are enabled): when that first
// process dies, the kernel kills everything in the namespace, and the
// wait for it returns only then. Where namespaces are refused, the host
// falls back to its process group plus every descendant it finds through
// /proc parent links while the plugin runs (once more before it is asked
// to exit), killed with the group and waited for, bounded; a descendant
// born and orphaned between those looks escapes this fallback.
//
// A child subreaper (PR_SET_CHILD_SUBREAPER) was not chosen: it is an
// attribute of the whole host process, which is a library's caller, and
// would make every orphan of any of its children a zombie of the host
// that only a wait on any child could reap, racing os/exec's own waits. A
// cgroup needs a delegated writable hierarchy, which a host process
// rarely has. In every case the waits of Close are bounded: after the
// tree is killed, the readers of stdout and stderr get a bound, then
// their pipes are closed.
//
// Failures become the kernel's typed outcomes (K7): anything before the
// request left the host is Definitive; a crash, a broken connection, a
// timeout, a cancellation or a protocol violation after a mutating call was
// sent is Uncertain and never retried; read-only calls are Definitive.
//
// # Generations
//
// Launch and Plugin are one verified process. Source is a plan.Source of
// plugin generations: what is a plugin's is here — launching a candidate
// on Reload, noticing a process die and launching a fresh one within the
// restart bound. The generations themselves — activation for future
// leases only, leases, drains, retained plans and the shutdown bound —
// are package toolgen's, shared with the MCP servers.
//
// Launch and Plugin know nothing of plans, runs, engines or pairs; Source
// knows plans only as toolgen builds them, and nothing of runs or pairs.
package host
