package cli

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/pluginlog"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/store"
)

// A recorded restart mid-pair, as 'runs show' prints it: each plan's
// generations with the runs that leased it, then the generation events.
func TestP6_RunsShowPrintsPluginGenerationsByPlan(t *testing.T) {
	ctx := t.Context()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	defer st.Close()

	clock := time.Date(2026, 12, 1, 21, 22, 15, 0, time.UTC)
	r, err := pluginlog.NewRecorder("pair-x", st, func() time.Time { return clock }, 0)
	require.NoError(t, err)
	genPlan := func(id, gen string, pid int) host.GenerationPlan {
		return host.GenerationPlan{Plan: plan.ID(id), Generations: []host.GenerationInfo{{ID: gen,
			Manifest: host.Manifest{Name: "wordcount", Version: "1.0.0", Digest: strings.Repeat("ab", 32), Path: "/opt/wc"}, PID: pid}}}
	}
	plans := map[plan.ID]host.GenerationPlan{
		"plan-pair-x-1": genPlan("plan-pair-x-1", "wordcount-g1", 11),
		"plan-pair-x-2": genPlan("plan-pair-x-2", "wordcount-g2", 22),
	}
	r.SetLookup(func(id plan.ID) (host.GenerationPlan, bool) { gp, ok := plans[id]; return gp, ok })
	r.OnEvent(host.Event{Kind: host.EventActivated, Plan: "plan-pair-x-1"})
	r.OnEvent(host.Event{Kind: host.EventDead, Generation: "wordcount-g1", Reason: "exit status 3"})
	r.OnEvent(host.Event{Kind: host.EventRestarted, Generation: "wordcount-g2", Reason: "replaces wordcount-g1"})
	r.OnEvent(host.Event{Kind: host.EventActivated, Plan: "plan-pair-x-2"})
	require.NoError(t, r.Flush(ctx))
	require.NoError(t, r.Close(ctx))

	recorded, err := pluginlog.Read(ctx, st, "pair-x")
	require.NoError(t, err)
	var b strings.Builder
	showPlugins(&b, recorded, []store.RunSummary{{ID: "pair-x/writer/run-1", PlanID: "plan-pair-x-1"},
		{ID: "pair-x/reviewer/run-1", PlanID: "plan-pair-x-2"}})
	require.Equal(t, `
plugin generations (by plan)
  plan-pair-x-1 (1 run)
    wordcount-g1  wordcount 1.0.0  sha256 abababababab  pid 11
  plan-pair-x-2 (1 run)
    wordcount-g2  wordcount 1.0.0  sha256 abababababab  pid 22

plugin events
  21:22:15.000  plan.activated       plan-pair-x-1
  21:22:15.000  generation.dead      wordcount-g1: exit status 3
  21:22:15.000  generation.restarted wordcount-g2: replaces wordcount-g1
  21:22:15.000  plan.activated       plan-pair-x-2
`, b.String())
}
