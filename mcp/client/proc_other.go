//go:build !linux

package client

import "time"

// execPath is empty: stdio servers need /proc/self/fd.
const execPath = ""

type proc struct{}

func descendants(int) []proc { return nil }

func killTree(int, []proc, time.Duration) {}
