package toolgen

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// named answers its name, or fails definitively when fail is set.
type named struct {
	def  tool.Definition
	fail bool
}

func newNamed(t *testing.T, name string, fail bool) *named {
	t.Helper()
	d, err := tool.NewDefinition(tool.DefinitionConfig{Name: name, Description: name, Effect: tool.ReadOnly, Replay: tool.Safe})
	require.NoError(t, err)
	return &named{def: d, fail: fail}
}

func (n *named) Definition() tool.Definition { return n.def }

func (n *named) Execute(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
	if n.fail {
		return tool.Result{}, tool.Fail(c.ID(), problem.Must("refused", "refused"))
	}
	return tool.NewResult(c.ID(), n.def.Name())
}

func memory(t *testing.T, planID string, ts ...tool.Tool) *plan.Memory {
	t.Helper()
	m, err := plan.NewMemory(memPlan(t, planID, ts...))
	require.NoError(t, err)
	return m
}

func memPlan(t *testing.T, planID string, ts ...tool.Tool) plan.Plan {
	t.Helper()
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	require.NoError(t, err)
	p, err := plan.New(plan.ID(planID), d)
	require.NoError(t, err)
	return p
}

func dispatch(t *testing.T, l *plan.Lease, name string) (tool.Result, error) {
	t.Helper()
	c, err := tool.NewCall(id.Call("call-"+name), name, []byte(`{}`))
	require.NoError(t, err)
	return l.Plan().Dispatcher().Dispatch(context.Background(), c, nil)
}

func TestM5_JoinHoldsEverySourcesPlanAndFollowsTheirChanges(t *testing.T) {
	ctx := context.Background()
	a, b := memory(t, "a-1", newNamed(t, "b", false)), memory(t, "m-1", newNamed(t, "c", true))
	j, err := Join(JoinConfig{PlanPrefix: "plan-x", Compiled: []tool.Tool{newNamed(t, "a", false)}, Sources: []plan.Source{a, b}})
	require.NoError(t, err)

	first, err := j.Lease(ctx)
	require.NoError(t, err)
	require.Equal(t, plan.ID("plan-x-1"), first.Plan().ID())
	require.Equal(t, 3, first.Plan().Len())
	require.Equal(t, 1, a.Outstanding("a-1"), "the joined lease holds the source's")
	res, err := dispatch(t, first, "b")
	require.NoError(t, err)
	require.Equal(t, "b", res.Content())
	// A source's typed outcome passes through unchanged.
	_, err = dispatch(t, first, "c")
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Definitive, ee.Outcome())

	// A change in one source: the next lease gets a new joined plan, the
	// held one keeps its tools.
	require.NoError(t, a.Activate(memPlan(t, "a-2", newNamed(t, "b", false), newNamed(t, "extra", false))))
	next, err := j.Lease(ctx)
	require.NoError(t, err)
	require.Equal(t, plan.ID("plan-x-2"), next.Plan().ID())
	_, ok := next.Plan().Lookup("extra")
	require.True(t, ok)
	_, ok = first.Plan().Lookup("extra")
	require.False(t, ok)
	inner, ok := j.Inner("plan-x-1")
	require.True(t, ok)
	require.Equal(t, []plan.ID{"a-1", "m-1"}, inner)

	again, err := j.LeaseExact(ctx, "plan-x-1")
	require.NoError(t, err)
	require.Equal(t, first.Plan().Fingerprint(), again.Plan().Fingerprint())
	for _, l := range []*plan.Lease{first, next, again} {
		require.NoError(t, l.Release(ctx))
	}
	require.Zero(t, a.Outstanding("a-1"))
	require.Zero(t, b.Outstanding("m-1"))
	_, err = j.LeaseExact(ctx, "plan-x-9")
	require.ErrorIs(t, err, plan.ErrUnknownPlan)
}

type refusing struct{ plan.Source }

func (refusing) Lease(context.Context) (*plan.Lease, error) { return nil, errors.New("closed") }

func TestM5_JoinReleasesWhatItLeasedWhenASourceOrANameFails(t *testing.T) {
	ctx := context.Background()
	a := memory(t, "a-1", newNamed(t, "b", false))
	j, err := Join(JoinConfig{PlanPrefix: "plan-x", Sources: []plan.Source{a, refusing{}}})
	require.NoError(t, err)
	_, err = j.Lease(ctx)
	require.Error(t, err)
	require.Zero(t, a.Outstanding("a-1"))

	dup, err := Join(JoinConfig{PlanPrefix: "plan-y", Compiled: []tool.Tool{newNamed(t, "b", false)}, Sources: []plan.Source{a}})
	require.NoError(t, err)
	_, err = dup.Lease(ctx)
	require.Error(t, err, "two tools named b")
	require.Zero(t, a.Outstanding("a-1"))

	_, err = Join(JoinConfig{Sources: []plan.Source{a}})
	require.Error(t, err)
}
