//go:build !linux

package host

import (
	"os/exec"
	"time"

	"github.com/spice-orch/spice-orch/plugins/internal/proctree"
)

// supported is false: the host ends a plugin's whole process tree only on
// Linux, so elsewhere it refuses to launch (ErrUnsupported).
const supported = false

func startTree(cmd *exec.Cmd) error { return cmd.Start() }

func killGroup(int)                                {}
func waitGone(int, []proctree.Proc, time.Duration) {}
