package devloop

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/proctree"
)

func TestL1_OneSourceGivesOneDigestFromTwoFolders(t *testing.T) {
	ctx := t.Context()
	out := t.TempDir()
	a, b := pluginDir(t, "1.0.0", valid), pluginDir(t, "1.0.0", valid)
	var builds []Build
	for _, dir := range []string{a, b} {
		bl, err := NewBuilder(ctx, goCmd, dir, out)
		require.NoError(t, err)
		bd, err := bl.Build(ctx)
		require.NoError(t, err)
		builds = append(builds, bd)
	}
	require.Equal(t, builds[0].SHA256, builds[1].SHA256, "the same source built in %s and %s", a, b)
	require.Equal(t, filepath.Join(out, builds[0].SHA256, "devplug"), builds[0].Path)
	require.Equal(t, builds[0].Path, builds[1].Path, "one content-addressed folder")
	got, err := host.Digest(builds[0].Path)
	require.NoError(t, err)
	require.Equal(t, builds[0].SHA256, got)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Len(t, entries, 1, "only the build's folder, no temporary one")
}

func TestL1_AFailedOrCancelledBuildLeavesNoTree(t *testing.T) {
	ctx := t.Context()
	out := t.TempDir()
	bl, err := NewBuilder(ctx, goCmd, pluginDir(t, "1.0.0", broken), out)
	require.NoError(t, err)
	_, err = bl.Build(ctx)
	require.ErrorIs(t, err, ErrBuild)
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = bl.Build(cancelled)
	require.ErrorIs(t, err, context.Canceled)
	entries, err := os.ReadDir(out)
	require.NoError(t, err)
	require.Empty(t, entries, "a failed or cancelled build leaves nothing under the builds")
}

func TestL2_ABurstBuildsOnceAndConvergesOnTheLastValidSource(t *testing.T) {
	h := start(t, pluginDir(t, "1.0.0", valid), nil)
	require.Equal(t, Activated, h.next(t, nil, Activated, Failed).Kind)

	// valid, broken, valid, broken, valid: one build, of the last.
	var seen []Report
	for i, v := range []string{"2.0.0", "2.0.1", "3.0.0", "3.0.1", "4.0.0"} {
		mode := valid
		if i%2 == 1 {
			mode = broken
		}
		h.edit(t, v, mode)
	}
	h.clock.fire()
	r := h.next(t, &seen, Activated, Failed, Discarded, Unchanged)
	require.Equal(t, Activated, r.Kind, r.String())
	require.Equal(t, 1, count(seen, Building), "one build for the burst")
	require.Equal(t, "4.0.0", activeVersion(t, h))

	// A burst that ends broken leaves the last valid source active.
	seen = nil
	h.edit(t, "5.0.0", valid)
	h.edit(t, "5.0.1", broken)
	h.clock.fire()
	f := h.next(t, &seen, Activated, Failed, Discarded, Unchanged)
	require.Equal(t, Failed, f.Kind, f.String())
	require.Equal(t, 1, count(seen, Building))
	require.Equal(t, r.Active, f.Active)
	require.Equal(t, "4.0.0", activeVersion(t, h))
}

func TestL3_AFailedCandidateKeepsTheLastGoodAndSaysWhere(t *testing.T) {
	h := start(t, pluginDir(t, "1.0.0", valid), nil)
	first := h.next(t, nil, Activated, Failed)
	require.Equal(t, Activated, first.Kind, first.String())
	require.Equal(t, "devplug-g1", first.Active)

	want := Diagnostic{File: "main.go", Line: brokenLine, Message: "undefined: undefinedThing"}
	var prev Report
	for i := range 2 { // the same mistake saved twice reads the same
		h.edit(t, "2.0.0", broken)
		h.clock.fire()
		f := h.next(t, nil, Activated, Failed)
		require.Equal(t, Failed, f.Kind, f.String())
		require.Equal(t, StageBuild, f.Stage)
		require.Equal(t, "devplug-g1", f.Active)
		require.Equal(t, []Diagnostic{want}, f.Diagnostics)
		require.Equal(t, "devplug-c"+string(rune('2'+i))+" failed (build); devplug-g1 stays active\nmain.go:12: undefined: undefinedThing", f.String())
		if i == 1 {
			require.Equal(t, prev.Diagnostics, f.Diagnostics)
		}
		prev = f
		requireLeaseOf(t, h.loop.Source(), "devplug-g1")
	}

	// A build that fails verification (stdout before the handshake).
	h.edit(t, "3.0.0", stdout)
	h.clock.fire()
	f := h.next(t, nil, Activated, Failed)
	require.Equal(t, Failed, f.Kind, f.String())
	require.Equal(t, StageVerify, f.Stage)
	require.Equal(t, "devplug-g1", f.Active)
	require.NotEmpty(t, f.SHA256)
	require.Contains(t, f.String(), "devplug-c4 failed (verify); devplug-g1 stays active\n")
	require.Contains(t, f.Diagnostics[0].Message, host.ErrContaminated.Error())
	requireLeaseOf(t, h.loop.Source(), "devplug-g1")
}

func TestL4_LeasedGenerationsKeepServingAndSupersededOnesEndByPID(t *testing.T) {
	// A generation is a tree of processes.
	h := startEnded(t, start, pluginDir(t, "1.0.0", valid), "DEVTEST_CHILD=1")
	src := h.loop.Source()
	ctx := t.Context()

	// A run playing across the activation.
	across, err := src.Lease(ctx)
	require.NoError(t, err)
	tree := h.tree(t, across, "child")

	// A run started during a broken build gets the last good generation.
	h.edit(t, "2.0.0", broken)
	h.clock.fire()
	require.Equal(t, Failed, h.next(t, nil, Activated, Failed).Kind)
	during := requireLeaseOf(t, src, "devplug-g1")

	h.edit(t, "2.0.0", valid)
	h.clock.fire()
	r := h.next(t, nil, Activated, Failed)
	require.Equal(t, Activated, r.Kind, r.String())
	require.Equal(t, "devplug-g2", r.Active)
	after := requireLeaseOf(t, src, "devplug-g2")

	require.Equal(t, "1.0.0", version(t, across))
	require.Equal(t, "1.0.0", version(t, during))
	require.Equal(t, "2.0.0", version(t, after))

	require.NoError(t, across.Release(ctx))
	require.NoError(t, during.Release(ctx))
	h.requireDrained(t, "devplug-g1")
	require.Empty(t, proctree.Live(tree), "every process of the superseded generation is gone")
	require.NoError(t, after.Release(ctx))
}

// requireLeaseOf leases src's current plan and checks it holds gen.
func requireLeaseOf(t *testing.T, src *host.Source, gen string) *plan.Lease {
	t.Helper()
	l, err := src.Lease(t.Context())
	require.NoError(t, err)
	gp, ok := src.Plan(l.Plan().ID())
	require.True(t, ok)
	require.Len(t, gp.Generations, 1)
	require.Equal(t, gen, gp.Generations[0].ID)
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

func activeVersion(t *testing.T, h *harness) string {
	t.Helper()
	gens := h.loop.Source().Current().Generations
	require.Len(t, gens, 1)
	return gens[0].Version
}

// version calls dev.version through the lease's plan.
func version(t *testing.T, l *plan.Lease) string {
	t.Helper()
	c, err := tool.NewCall(id.Call("v1"), "dev.version", []byte(`{}`))
	require.NoError(t, err)
	res, err := l.Plan().Dispatcher().Dispatch(t.Context(), c, nil)
	require.NoError(t, err)
	var got struct{ Version string }
	require.NoError(t, jsonUnmarshal(res.Content(), &got))
	return got.Version
}
