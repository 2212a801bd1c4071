package orchestrator_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// AfterRun delivery shares one block of relayed slots between a relay's two
// runs, sized from the first run. Runs of different lengths, in either
// order, must still relay every event exactly as Live delivery does.
func TestO7_AfterRunRelaysUnevenRunsLikeLive(t *testing.T) {
	for name, scripts := range map[string][2]script{
		"long then short": {toolThenAnswer("A draft."), {enginetest.Answer("Done.")}},
		"short then long": {{enginetest.Answer("A draft.")}, toolThenAnswer("Done.")},
	} {
		t.Run(name, func(t *testing.T) {
			encode := func(d orchestrator.Delivery) []string {
				h := newHarness(t, orchestrator.Relay, scripts[0], scripts[1], enginetest.Echo())
				h.cfg.Timeline.Delivery = d
				p, res, err := h.run(t)
				require.NoError(t, err)
				require.Equal(t, orchestrator.ReasonCompleted, res.Reason)
				evs := timeline(t, p)
				requireTimeline(t, evs)
				var out []string
				for _, e := range evs {
					b := e.AppendJSON(nil)
					require.Equal(t, len(b), e.EncodedLen(), "%s", b)
					out = append(out, string(b))
				}
				return out
			}
			require.Equal(t, encode(orchestrator.Live), encode(orchestrator.AfterRun))
		})
	}
}

// pair.started names the plan each pair leased, also when consecutive
// pairs lease different plans (the pair caches the last fingerprint's hex
// form).
func TestO7_StartedNamesEachPairsLeasedPlan(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A."), enginetest.Answer("B.")},
		script{enginetest.Answer("C."), enginetest.Answer("D.")})
	started := func() (orchestrator.Started, plan.Plan) {
		current := h.memory.Current()
		p, _, err := h.run(t)
		require.NoError(t, err)
		s, ok := timeline(t, p)[0].Payload().(orchestrator.Started)
		require.True(t, ok)
		return s, current
	}
	s1, p1 := started()
	require.Equal(t, p1.Fingerprint(), s1.PlanFingerprint)

	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: []tool.Tool{enginetest.Echo()}})
	require.NoError(t, err)
	p2, err := plan.New("plan-2", d)
	require.NoError(t, err)
	require.NotEqual(t, p1.Fingerprint(), p2.Fingerprint(), "the plans must differ for this test")
	require.NoError(t, h.memory.Activate(p2))

	s2, current := started()
	require.Equal(t, plan.ID("plan-2"), current.ID())
	require.Equal(t, p2.Fingerprint(), s2.PlanFingerprint)
	require.Equal(t, "plan-2", s2.PlanID)
}
