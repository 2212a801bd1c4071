// Package proctree starts a child process so that its whole tree can be
// ended, and finds and ends the descendants of a process on Linux,
// whatever process group or session they moved to: Start puts the child
// in a new PID namespace when the system allows it, else in a new process
// group; Descendants follows parent links in /proc and names each process
// by its PID and start time, so that a reused PID is never taken for a
// process it saw.
//
// The plugin host, the plugin conformance suite's launcher and the MCP
// client use it. It must not know about plugins, MCP or protocols.
package proctree
