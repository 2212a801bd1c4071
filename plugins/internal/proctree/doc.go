// Package proctree finds and ends the descendants of a process on Linux,
// whatever process group or session they moved to: it follows parent
// links in /proc, and names each process by its PID and start time, so
// that a reused PID is never taken for a process it saw.
//
// The plugin host and the conformance suite's launcher both use it. It
// must not know about plugins or protocols.
package proctree
