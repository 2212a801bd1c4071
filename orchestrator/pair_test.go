package orchestrator_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// The first worker calls a tool before answering, so its own history holds
// a tool call and a tool result the second worker must never see.
func toolThenAnswer(answer string) script {
	return script{
		{enginetest.Call("call-1", "echo", `{"x":1}`), enginetest.Done(10, 5)},
		enginetest.Answer(answer),
	}
}

func TestO1_WorkersRunOnTheirOwnEngines(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, toolThenAnswer("A draft."), script{enginetest.Answer("Done.")}, enginetest.Echo())
	p, res, err := h.run(t)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonCompleted, res.Reason)

	// Each provider served only its own worker's operations, with its own
	// definition.
	require.Equal(t, 2, h.first.Calls())
	require.Equal(t, 1, h.second.Calls())
	for _, r := range h.first.Requests() {
		require.Equal(t, "Write.", r.System())
	}
	for _, r := range h.second.Requests() {
		require.Equal(t, "Review.", r.System())
	}
	// The first worker's own history grew with its tool round...
	reqs := h.first.Requests()
	require.Equal(t, 3, reqs[1].NumMessages())
	// ...and its runs and the second worker's are distinct runs.
	starts := relayed(timeline(t, p), event.KindRunStarted)
	require.Len(t, starts, 2)
	require.Equal(t, "writer", starts[0].Worker())
	require.Equal(t, "reviewer", starts[1].Worker())
	require.NotEqual(t, starts[0].RunID(), starts[1].RunID())
}

func TestO3_SecondWorkersFirstRequestIsOneUserMessageFromTheFirstAnswer(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, toolThenAnswer("A draft."), script{enginetest.Answer("Done.")}, enginetest.Echo())
	_, _, err := h.run(t)
	require.NoError(t, err)

	reqs := h.second.Requests()
	require.Len(t, reqs, 1)
	msgs := slices.Collect(reqs[0].Messages())
	require.Len(t, msgs, 1, "exactly one message: nothing of the first worker's history")
	m := msgs[0]
	require.Equal(t, message.RoleUser, m.Role())
	require.Equal(t, 1, m.Len())
	require.Equal(t, message.KindText, m.Part(0).Kind())
	require.Zero(t, m.NumCalls())
	require.Empty(t, slices.Collect(m.Results()))
	require.Equal(t, "Task:\n"+task+"\n\nAnswer from writer:\nA draft.", m.Text())
	require.NotContains(t, m.Text(), "call-1")
	require.NotContains(t, m.Text(), `{"x":1}`)
}

func TestO2_EveryRunUsesThePairPlanWhileANewPlanIsActivated(t *testing.T) {
	h := newHarness(t, orchestrator.ReviewLoop,
		script{enginetest.Answer("Draft one."), enginetest.Answer("Draft two.")},
		script{enginetest.Answer("Shorter."), enginetest.Answer("APPROVED")})
	activated := false
	h.cfg.First.Engine.Provider = &hookProvider{inner: h.first, hook: func(context.Context, int) error {
		if !activated {
			activated = true
			p2, err := plan.New("plan-2", emptyDispatcher(t))
			require.NoError(t, err)
			require.NoError(t, h.memory.Activate(p2)) // in the middle of the first run
		}
		return nil
	}}
	p, res, err := h.run(t)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)
	require.True(t, activated)
	require.Equal(t, plan.ID("plan-1"), p.Plan().ID)

	evs := timeline(t, p)
	requireTimeline(t, evs)
	starts := relayed(evs, event.KindRunStarted)
	require.Len(t, starts, 4)
	for _, s := range starts {
		require.Equal(t, "plan-1", s.Payload().(event.RunStarted).PlanID, "run %s of %s", s.RunID(), s.Worker())
	}
	started, ok := evs[0].Payload().(orchestrator.Started)
	require.True(t, ok)
	require.Equal(t, "plan-1", started.PlanID)

	// One pair lease on the current plan, every run on exactly its ID, and
	// the pair lease released once, after the last run's.
	require.Equal(t, []string{
		"lease plan-1",
		"exact plan-1", "release-exact plan-1",
		"exact plan-1", "release-exact plan-1",
		"exact plan-1", "release-exact plan-1",
		"exact plan-1", "release-exact plan-1",
		"release plan-1",
	}, h.source.Log())
	require.Zero(t, h.memory.Stats().Outstanding)
	require.Equal(t, plan.ID("plan-2"), h.memory.Current().ID())
}

func emptyDispatcher(t *testing.T) tool.Dispatcher {
	t.Helper()
	d, err := tool.NewDispatcher(tool.DispatcherConfig{})
	require.NoError(t, err)
	return d
}

func TestO2_AFailedLeaseReleaseFailsThePair(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, script{enginetest.Answer("A.")}, script{enginetest.Answer("B.")})
	h.source.releaseErr = errors.New("store unavailable")
	p, res, err := h.run(t)
	require.ErrorIs(t, err, orchestrator.ErrInfrastructure)
	var re *plan.ReleaseError
	require.ErrorAs(t, err, &re)
	require.Equal(t, orchestrator.ReasonInfrastructure, res.Reason)
	end := requireTimeline(t, timeline(t, p))
	require.Equal(t, orchestrator.ReasonInfrastructure, end.Reason)
	require.Equal(t, orchestrator.KindFailed, end.Kind())
	require.Equal(t, 1, count(h.source.Log(), "release plan-1"))
}

func count(log []string, entry string) int {
	n := 0
	for _, e := range log {
		if e == entry {
			n++
		}
	}
	return n
}

func TestO2_ErrorsBeforeTheLeaseLeaveNoTrace(t *testing.T) {
	for name, mutate := range map[string]func(*orchestrator.Config){
		"no task":       func(c *orchestrator.Config) { c.Task = "" },
		"no pattern":    func(c *orchestrator.Config) { c.Pattern = 0 },
		"bad id":        func(c *orchestrator.Config) { c.ID = "pair 1" },
		"same roles":    func(c *orchestrator.Config) { c.Second.Role = c.First.Role },
		"bad role":      func(c *orchestrator.Config) { c.First.Role = "Writer" },
		"no plans":      func(c *orchestrator.Config) { c.Plans = nil },
		"other plans":   func(c *orchestrator.Config) { c.First.Engine.Plans = &loggingSource{} },
		"no provider":   func(c *orchestrator.Config) { c.Second.Engine.Provider = nil },
		"no definition": func(c *orchestrator.Config) { c.First.Definition = engine.Definition{} },
		"rounds":        func(c *orchestrator.Config) { c.MaxRounds = orchestrator.MaxRounds + 1 },
		"budget":        func(c *orchestrator.Config) { c.Budget.Tokens = -1 },
		"timeline":      func(c *orchestrator.Config) { c.Timeline.MaxEvents = 8 },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, orchestrator.ReviewLoop, nil, nil)
			mutate(&h.cfg)
			p, err := orchestrator.Run(context.Background(), h.cfg)
			require.Error(t, err)
			require.ErrorIs(t, err, bound.ErrInvalid)
			require.Nil(t, p)
			require.Empty(t, h.source.Log())
			require.Zero(t, h.first.Calls()+h.second.Calls())
		})
	}
}

func TestO2_APlanSourceFailureLeavesNoTrace(t *testing.T) {
	h := newHarness(t, orchestrator.Relay, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p, err := orchestrator.Start(ctx, h.cfg)
	require.ErrorIs(t, err, context.Canceled)
	require.Nil(t, p)
	require.Empty(t, h.source.Log())

	h.cfg.Plans = panickingSource{}
	p, err = orchestrator.Run(context.Background(), h.cfg)
	require.ErrorIs(t, err, orchestrator.ErrInfrastructure)
	require.Nil(t, p)
}

type panickingSource struct{}

func (panickingSource) Lease(context.Context) (*plan.Lease, error) { panic("secret") }
func (panickingSource) LeaseExact(context.Context, plan.ID) (*plan.Lease, error) {
	panic("secret")
}

var _ model.Provider = (*hookProvider)(nil)
