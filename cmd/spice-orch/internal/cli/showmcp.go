package cli

import (
	"fmt"
	"io"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/mcplog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/toolgen"
)

// pinnedWord is how runs show marks a server's code.
func pinnedWord(pinned bool) string {
	if pinned {
		return "pinned"
	}
	return "UNPINNED"
}

// showMCP prints each plan of the pair's MCP servers with its generations
// and tools, every server marked pinned or UNPINNED, then the events.
func showMCP(out io.Writer, evs []mcplog.Recorded) {
	if len(evs) == 0 {
		return
	}
	fmt.Fprintln(out, "\nmcp generations (by plan)")
	for _, e := range evs {
		if e.Kind != string(toolgen.EventActivated) && e.Kind != mcplog.KindPlanLeased {
			continue
		}
		fmt.Fprintf(out, "  %s\n", render.Field(e.PlanID))
		for _, g := range e.Generations {
			line := fmt.Sprintf("    %s  server %s  %s", render.Field(g.Generation), render.Field(g.Server), pinnedWord(g.Pinned))
			if g.PID > 0 {
				line += fmt.Sprintf("  pid %d", g.PID)
			}
			fmt.Fprintln(out, line)
			for _, t := range g.Tools {
				fmt.Fprintf(out, "      %s  %s  %s %s (%s)  digest %s\n", render.Field(t.Name), pinnedWord(t.Pinned),
					render.Field(t.Effect), render.Field(t.Replay), render.Field(t.From), render.Field(short(t.Digest)))
			}
		}
	}
	fmt.Fprintln(out, "\nmcp events")
	for _, e := range evs {
		what := e.Generation
		if e.Kind == string(toolgen.EventActivated) || e.Kind == mcplog.KindPlanLeased {
			what = e.PlanID
		} else if e.Server != "" {
			what += " (server " + render.Field(e.Server) + ", " + pinnedWord(e.Pinned) + ")"
		}
		line := fmt.Sprintf("  %s  %-20s %s", e.Time.UTC().Format("15:04:05.000"), render.Field(e.Kind), render.Field(what))
		if e.InFlight > 0 {
			line += fmt.Sprintf(", %d calls in flight", e.InFlight)
		}
		if e.Reason != "" {
			line += ": " + render.Text(e.Reason)
		}
		fmt.Fprintln(out, line)
	}
}
