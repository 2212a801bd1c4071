package host

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// events collects a source's events.
type events chan Event

func (e events) on(ev Event) { e <- ev }

// next returns the next event of kind, skipping others.
func (e events) next(t *testing.T, kind EventKind) Event {
	t.Helper()
	timeout := time.NewTimer(60 * time.Second)
	defer timeout.Stop()
	for {
		select {
		case ev := <-e:
			if ev.Kind == kind {
				return ev
			}
		case <-timeout.C:
			t.Fatalf("no %s event", kind)
		}
	}
}

func newSource(t *testing.T, mut func(*SourceConfig), plugins ...Config) (*Source, events) {
	t.Helper()
	evs := make(events, 256)
	cfg := SourceConfig{PlanPrefix: "plan-t", Plugins: plugins, Compiled: []tool.Tool{compiledEcho(t)}, OnEvent: evs.on}
	if mut != nil {
		mut(&cfg)
	}
	s, err := NewSource(t.Context(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		gens := s.Generations()
		require.NoError(t, s.Close())
		for _, g := range gens {
			requireGone(t, g.PID)
		}
	})
	return s, evs
}

func lease(t *testing.T, s *Source) *plan.Lease {
	t.Helper()
	l, err := s.Lease(t.Context())
	require.NoError(t, err)
	return l
}

func echoVia(t *testing.T, l *plan.Lease) error {
	t.Helper()
	res, err := l.Plan().Dispatcher().Dispatch(t.Context(), call(t, "e1", "echo", `{"text":"x"}`), nil)
	if err == nil {
		require.Equal(t, "x", res.Content())
	}
	return err
}

func TestP6_ActivationChangesOnlyFutureLeases(t *testing.T) {
	s, evs := newSource(t, nil, config(t, fixtureV1, ""))
	old := lease(t, s)
	require.Equal(t, plan.ID("plan-t-1"), old.Plan().ID())
	oldGen := s.Current().Generations[0]
	require.Equal(t, "fixture-g1", oldGen.ID)
	require.Equal(t, "1.0.0", oldGen.Version)

	info, err := s.Reload(t.Context(), 0, config(t, fixtureV2, ""))
	require.NoError(t, err)
	require.Equal(t, "fixture-g2", info.ID)
	require.Equal(t, "2.0.0", info.Version)
	require.Equal(t, plan.ID("plan-t-1"), evs.next(t, EventActivated).Plan)
	require.Equal(t, plan.ID("plan-t-2"), evs.next(t, EventActivated).Plan)

	// A new lease gets the new generation; the old lease keeps its own,
	// whose process still serves it.
	fresh := lease(t, s)
	require.Equal(t, plan.ID("plan-t-2"), fresh.Plan().ID())
	require.NotEqual(t, old.Plan().Fingerprint(), plan.Fingerprint{}, "plans are fingerprinted")
	require.NoError(t, echoVia(t, old))
	require.NoError(t, echoVia(t, fresh))
	gp, ok := s.Plan("plan-t-1")
	require.True(t, ok)
	require.Equal(t, "fixture-g1", gp.Generations[0].ID, "the plan ID finds its generation")
	require.Equal(t, "draining", gp.Generations[0].State)
	require.True(t, alive(oldGen.PID))

	// Releasing the last lease on the old generation drains it.
	require.NoError(t, old.Release(t.Context()))
	require.Equal(t, "fixture-g1", evs.next(t, EventDrained).Generation)
	requireGone(t, oldGen.PID)
	_, err = s.LeaseExact(t.Context(), "plan-t-1")
	require.ErrorIs(t, err, plan.ErrUnknownPlan, "a drained generation's plan is not leased again")
	require.NoError(t, fresh.Release(t.Context()))
}

func TestP6_FailedCandidateNeverChangesTheActiveGeneration(t *testing.T) {
	s, evs := newSource(t, nil, config(t, fixtureV1, ""))
	before := s.Current()
	for name, cfg := range map[string]Config{
		"wrong digest":       func() Config { c := config(t, fixtureV1, ""); c.SHA256 = digestOf(t, fixtureV2); return c }(),
		"crash at handshake": config(t, fixtureV2, "exit_early"),
		"bad manifest":       config(t, fixtureV2, "bad_manifest"),
		"hang":               func() Config { c := config(t, fixtureV2, "hang"); c.StartupTimeout = 200 * time.Millisecond; return c }(),
	} {
		_, err := s.Reload(t.Context(), 0, cfg)
		var le *LaunchError
		require.ErrorAs(t, err, &le, name)
		require.NotEmpty(t, evs.next(t, EventCandidateFailed).Reason, name)
		require.Equal(t, before.Plan, s.Current().Plan, name)
		l := lease(t, s)
		require.NoError(t, echoVia(t, l), name)
		require.NoError(t, l.Release(t.Context()))
	}
	require.Len(t, s.Generations(), 1, "no candidate process is kept")
}

func TestP7_DrainBoundThenForcedStopMarksMutatingCallsUncertain(t *testing.T) {
	s, evs := newSource(t, func(c *SourceConfig) { c.DrainTimeout = 300 * time.Millisecond }, config(t, fixtureV1, ""))
	l := lease(t, s)
	rep := progress{msgs: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		_, err := l.Plan().Dispatcher().Dispatch(context.Background(), call(t, "h1", "hold", `{"millis":60000}`), rep)
		done <- err
	}()
	<-rep.msgs
	// The run's lease ends while its call is still in flight (as when a
	// run outlives its plan by a bug); the drain bound then applies.
	require.NoError(t, l.Release(t.Context()))
	_, err := s.Reload(t.Context(), 0, config(t, fixtureV2, ""))
	require.NoError(t, err)
	forced := evs.next(t, EventForced)
	require.Equal(t, "fixture-g1", forced.Generation)
	require.Equal(t, 1, forced.InFlight)
	ee := execErr(t, <-done)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	require.Equal(t, CodeStopped, ee.Problem().Code())
	require.Equal(t, "forced", s.Generations()[0].State)
	requireGone(t, s.Generations()[0].PID)
}

func TestP7_CloseDrainsThenForcesAndLeavesNoProcess(t *testing.T) {
	s, err := NewSource(t.Context(), SourceConfig{PlanPrefix: "plan-c", ShutdownTimeout: 300 * time.Millisecond,
		Plugins: []Config{config(t, fixtureV1, ""), config(t, fixtureV2, "grandchild")}, Compiled: nil})
	require.Error(t, err, "two plugins with the same tool names cannot share a plan")
	require.Contains(t, err.Error(), "two tools are named")
	require.Nil(t, s)

	s, _ = newSource(t, func(c *SourceConfig) { c.ShutdownTimeout = 300 * time.Millisecond }, config(t, fixtureV1, "grandchild"))
	var members []int
	g := s.Current().Generations[0]
	members = groupMembers(t, g.PID)
	require.Len(t, members, 2)
	held := lease(t, s) // never released: Close must force
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), 20*time.Second)
	for _, pid := range members {
		requireGone(t, pid)
	}
	_, err = s.Lease(t.Context())
	require.ErrorIs(t, err, ErrSourceClosed)
	require.NoError(t, held.Release(t.Context()), "release after close is still a decrement")
}

func TestP7_RestartAfterCrashIsBoundedAndNeverReplaysTheCall(t *testing.T) {
	s, evs := newSource(t, func(c *SourceConfig) { c.MaxRestarts = 2 }, config(t, fixtureV1, "crash"))
	write := func(i int) error {
		l := lease(t, s)
		defer func() { require.NoError(t, l.Release(t.Context())) }()
		_, err := l.Plan().Dispatcher().Dispatch(t.Context(), call(t, "w", "write", `{"path":"`+t.TempDir()+`/f","content":"x"}`), nil)
		return err
	}
	for i := range 2 {
		ee := execErr(t, write(i))
		require.Equal(t, tool.Uncertain, ee.Outcome(), "never replayed: the call ends uncertain")
		require.NotEmpty(t, evs.next(t, EventDead).Generation)
		r := evs.next(t, EventRestarted)
		require.True(t, strings.HasSuffix(r.Generation, "-g"+string(rune('2'+i))), r.Generation)
	}
	ee := execErr(t, write(2))
	require.Equal(t, tool.Uncertain, ee.Outcome())
	evs.next(t, EventDead)
	failed := evs.next(t, EventPluginFailed)
	require.Contains(t, failed.Reason, "restarted 2 times")
	require.NotEmpty(t, s.Failed(0))
	// The failed plugin's tools stay in the plan and fail definitively.
	l := lease(t, s)
	_, err := l.Plan().Dispatcher().Dispatch(t.Context(), call(t, "w", "write", `{"path":"/nonexistent","content":"x"}`), nil)
	require.Equal(t, tool.Definitive, execErr(t, err).Outcome())
	require.NoError(t, l.Release(t.Context()))
	// Reload clears the failure.
	_, err = s.Reload(t.Context(), 0, config(t, fixtureV1, ""))
	require.NoError(t, err)
	require.Empty(t, s.Failed(0))
}

func TestP6_ActivationNeverBlocksAPlayingRun(t *testing.T) {
	s, _ := newSource(t, nil, config(t, fixtureV1, ""))
	l := lease(t, s)
	stop := make(chan struct{})
	calls := make(chan int, 1)
	go func() {
		n := 0
		for {
			select {
			case <-stop:
				calls <- n
				return
			default:
			}
			if echoVia(t, l) != nil {
				calls <- -1
				return
			}
			n++
		}
	}()
	for range 3 {
		_, err := s.Reload(t.Context(), 0, config(t, fixtureV2, ""))
		require.NoError(t, err)
	}
	close(stop)
	n := <-calls
	require.Positive(t, n, "the run kept calling its generation throughout")
	require.NoError(t, l.Release(t.Context()))
}

func TestP7_CrashesDuringDrainAndAfterActivationLeaveAConsistentState(t *testing.T) {
	s, evs := newSource(t, nil, config(t, fixtureV1, ""))
	old := lease(t, s)
	g1 := s.Current().Generations[0]
	_, err := s.Reload(t.Context(), 0, config(t, fixtureV2, ""))
	require.NoError(t, err)
	g2 := s.Current().Generations[0]

	// The draining generation dies while a lease still holds it: its
	// calls fail definitively (nothing is sent to a dead process) and it
	// is not restarted, being retired.
	require.NoError(t, syscall.Kill(g1.PID, syscall.SIGKILL))
	<-s.gens[0].p.Exited()
	err = echoVia(t, old)
	require.Equal(t, tool.Definitive, execErr(t, err).Outcome())
	require.NoError(t, old.Release(t.Context()))
	require.Equal(t, g1.ID, evs.next(t, EventDrained).Generation)
	requireGone(t, g1.PID)

	// The new active generation dies right after its activation: a fresh
	// launch replaces it for future leases.
	require.NoError(t, syscall.Kill(g2.PID, syscall.SIGKILL))
	require.Equal(t, g2.ID, evs.next(t, EventDead).Generation)
	r := evs.next(t, EventRestarted)
	require.Equal(t, "fixture-g3", r.Generation)
	l := lease(t, s)
	require.NoError(t, echoVia(t, l))
	require.NoError(t, l.Release(t.Context()))
	requireGone(t, g2.PID)
}

// A generation Close stops by force, with a leased run's mutating call in
// flight, is reported forced, never drained.
func TestP7_ForcedStopDuringCloseIsReportedForced(t *testing.T) {
	s, evs := newSource(t, func(c *SourceConfig) { c.ShutdownTimeout = 300 * time.Millisecond }, config(t, fixtureV1, ""))
	l := lease(t, s) // held through Close: Close must force
	rep := progress{msgs: make(chan string, 1)}
	done := make(chan error, 1)
	go func() {
		_, err := l.Plan().Dispatcher().Dispatch(context.Background(), call(t, "h1", "hold", `{"millis":60000}`), rep)
		done <- err
	}()
	<-rep.msgs
	require.NoError(t, s.Close())
	ee := execErr(t, <-done)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	var kinds []EventKind
	for len(evs) > 0 {
		ev := <-evs
		if ev.Generation == "fixture-g1" {
			kinds = append(kinds, ev.Kind)
			if ev.Kind == EventForced {
				require.Equal(t, 1, ev.InFlight)
			}
		}
	}
	require.Equal(t, []EventKind{EventDraining, EventForced}, kinds)
	require.Equal(t, "forced", s.Generations()[0].State)
	require.NoError(t, l.Release(t.Context()))
}
