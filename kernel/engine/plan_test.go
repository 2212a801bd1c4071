package engine_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// The engine derives a plan's request tools and fingerprint once and
// shares them between runs on that plan. Runs that alternate between two
// plans on one engine must each still see exactly their own plan, in
// run.started and in every request (K11, K13).
func TestK13_RunsAlternatingPlansEachUseTheirOwn(t *testing.T) {
	plans, err := enginetest.Plan("plan-1", enginetest.Echo())
	require.NoError(t, err)
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{readOnlyTool(t, "other", nil)}})
	require.NoError(t, err)
	newer, err := plan.New("plan-2", d)
	require.NoError(t, err)
	require.NoError(t, plans.Activate(newer))
	older, err := plans.LeaseExact(context.Background(), "plan-1")
	require.NoError(t, err)
	want := map[plan.ID]struct {
		fingerprint string
		tools       []string
	}{
		"plan-1": {older.Plan().Fingerprint().String(), []string{"echo"}},
		"plan-2": {newer.Fingerprint().String(), []string{"other"}},
	}
	require.NoError(t, older.Release(context.Background()))
	require.NotEqual(t, want["plan-1"].fingerprint, want["plan-2"].fingerprint)

	p := enginetest.NewProvider(enginetest.Answer("ok"))
	p.Cycle, p.Record = true, true
	e, err := engine.New(engine.Config{Provider: p, Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
	require.NoError(t, err)
	order := []plan.ID{"plan-1", "plan-2", "plan-2", "plan-1", "plan-2"}
	for i, pid := range order {
		r, err := e.Run(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello"), Plan: pid})
		require.NoError(t, err)
		_, err = waitRun(r)
		require.NoError(t, err)
		started := payloadOf[event.RunStarted](t, events(t, r)[0])
		require.Equal(t, string(pid), started.PlanID, "run %d", i)
		require.Equal(t, want[pid].fingerprint, started.PlanFingerprint, "run %d", i)
		reqs := p.Requests()
		require.Equal(t, want[pid].tools, toolNames(reqs[len(reqs)-1].Tools()), "run %d", i)
	}
	require.NoError(t, e.Close(context.Background()))
}
