//go:build !linux

package client

// execPath is empty: stdio servers need /proc/self/fd and proctree.
const execPath = ""
