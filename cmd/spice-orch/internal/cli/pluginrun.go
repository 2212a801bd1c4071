package cli

import (
	"fmt"
	"io"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
)

// pluginHeader names the plugin generations of the pair's plan, so that
// the plan ID of the timeline leads to the processes that served it.
func pluginHeader(out io.Writer, built *compose.Pair) {
	gens := built.Generations()
	for _, g := range gens {
		fmt.Fprintf(out, "plugin %s: %s %s, sha256 %s, pid %d, in plan %s\n",
			g.ID, g.Name, g.Version, g.Digest[:12], g.PID, built.Plan.ID)
	}
	if len(gens) > 0 {
		fmt.Fprintln(out)
	}
}
