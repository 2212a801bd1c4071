//go:build !linux

package proctree

import (
	"os/exec"
	"time"
)

// Supported is false: the whole tree is ended only on Linux.
const Supported = false

// SetNamespaces does nothing without Linux.
func SetNamespaces(bool) bool { return false }

// Start starts cmd plainly.
func Start(cmd *exec.Cmd) error { return cmd.Start() }

// KillGroup does nothing without Linux.
func KillGroup(int) {}

// WaitGone does nothing without Linux.
func WaitGone(int, []Proc, time.Duration) {}
