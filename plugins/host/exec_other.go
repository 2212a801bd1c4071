//go:build !linux

package host

import "time"

// execPath is empty: without /proc/self/fd the host cannot execute the
// file it verified, so it refuses to launch (ErrUnsupported).
const execPath = ""

func killGroup(int)                    {}
func waitGroupGone(int, time.Duration) {}
