package cli

import (
	"fmt"
	"io"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/pluginlog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/store"
)

// showPlugins prints, for a pair whose plans came from plugins, each plan's
// generations and the runs that leased it, then the generation events.
func showPlugins(out io.Writer, evs []pluginlog.Recorded, runs []store.RunSummary) {
	if len(evs) == 0 {
		return
	}
	byPlan := map[string][]string{}
	for _, r := range runs {
		byPlan[r.PlanID] = append(byPlan[r.PlanID], r.ID)
	}
	fmt.Fprintln(out, "\nplugin generations (by plan)")
	for _, e := range evs {
		if e.Kind != string(host.EventActivated) {
			continue
		}
		used := "no run"
		if rs := byPlan[e.PlanID]; len(rs) > 0 {
			used = fmt.Sprintf("%d runs", len(rs))
			if len(rs) == 1 {
				used = "1 run"
			}
		}
		fmt.Fprintf(out, "  %s (%s)\n", render.Field(e.PlanID), used)
		for _, g := range e.Generations {
			fmt.Fprintf(out, "    %s  %s %s  sha256 %s  pid %d\n", render.Field(g.Generation), render.Field(g.Name),
				render.Field(g.Version), render.Field(short(g.SHA256)), g.PID)
		}
	}
	fmt.Fprintln(out, "\nplugin events")
	for _, e := range evs {
		what := e.Generation
		if e.Kind == string(host.EventActivated) {
			what = e.PlanID
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

func short(digest string) string {
	if len(digest) > 12 {
		return digest[:12]
	}
	return digest
}
