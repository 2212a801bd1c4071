package servers

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/toolgen"
)

func fixtureConfig(t *testing.T) client.Config {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	exe, err = filepath.EvalSymlinks(exe)
	require.NoError(t, err)
	d, err := client.Digest(exe)
	require.NoError(t, err)
	return client.Config{Name: "fixture", Path: exe, SHA256: d, Env: []string{envServe + "=1"}}
}

type events chan Event

func (e events) on(ev Event) { e <- ev }

// next returns the next event of kind, skipping others.
func (e events) next(t *testing.T, kind toolgen.EventKind) Event {
	t.Helper()
	timeout := time.NewTimer(20 * time.Second) // a bound on a wait, not a sleep
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

func newSource(t *testing.T, servers ...client.Config) (*Source, events) {
	t.Helper()
	evs := make(events, 64)
	s, err := New(context.Background(), Config{PlanPrefix: "plan-m", Servers: servers, OnEvent: evs.on})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	evs.next(t, toolgen.EventActivated) // the first plan
	return s, evs
}

var callSeq atomic.Int64

func call(t *testing.T, l *plan.Lease, name string, args any) error {
	t.Helper()
	b, err := json.Marshal(args)
	require.NoError(t, err)
	c, err := tool.NewCall(id.Call("call-"+strconv.FormatInt(callSeq.Add(1), 10)), name, b)
	require.NoError(t, err)
	_, err = l.Plan().Dispatcher().Dispatch(context.Background(), c, nil)
	return err
}

func lease(t *testing.T, s *Source) *plan.Lease {
	t.Helper()
	l, err := s.Lease(context.Background())
	require.NoError(t, err)
	return l
}

func has(l *plan.Lease, name string) bool {
	_, ok := l.Plan().Lookup(name)
	return ok
}

func TestM2_ListChangedMidPairKeepsTheRunningToolsAndServesNewOnesToNewPairs(t *testing.T) {
	s, evs := newSource(t, fixtureConfig(t))
	running := lease(t, s)
	require.False(t, has(running, "extra"))
	first := s.Current().Plan

	// The server adds a tool while the pair runs: list_changed.
	require.NoError(t, call(t, running, "grow", map[string]string{}))
	activated := evs.next(t, toolgen.EventActivated)
	require.NotEqual(t, first, activated.Plan)
	require.Equal(t, "fixture-g1", evs.next(t, toolgen.EventDraining).Generation)

	// The running pair keeps its tool set, and its tools still serve.
	require.Equal(t, first, running.Plan().ID())
	require.False(t, has(running, "extra"))
	require.NoError(t, call(t, running, "echo", map[string]string{"text": "hi"}))

	// A new pair gets the new tools.
	next := lease(t, s)
	require.Equal(t, activated.Plan, next.Plan().ID())
	require.True(t, has(next, "extra"))
	require.NoError(t, call(t, next, "extra", map[string]string{}))

	// Once the running pair is done, the superseded generation drains;
	// the connection, which the new generation uses, stays.
	require.NoError(t, running.Release(context.Background()))
	require.Equal(t, "fixture-g1", evs.next(t, toolgen.EventDrained).Generation)
	require.NoError(t, call(t, next, "echo", map[string]string{"text": "still"}))
	require.NoError(t, next.Release(context.Background()))
}

func TestM2_ChangedPinnedDescriptionAfterListChangedIsRefusedAndTheActiveGenerationStays(t *testing.T) {
	probe, err := client.Connect(context.Background(), fixtureConfig(t))
	require.NoError(t, err)
	var digest string
	for _, in := range probe.Info() {
		if in.Name == "echo" {
			digest = in.Digest
		}
	}
	require.NoError(t, probe.Close())
	cfg := fixtureConfig(t)
	cfg.Tools = map[string]client.ToolConfig{"echo": {Digest: digest}}
	s, evs := newSource(t, cfg)
	before := s.Current()

	l := lease(t, s)
	require.NoError(t, call(t, l, "rug", map[string]string{}))
	failed := evs.next(t, toolgen.EventCandidateFailed)
	require.Contains(t, failed.Reason, "echo")
	require.NoError(t, l.Release(context.Background()))

	require.Equal(t, before.Plan, s.Current().Plan, "the active generation stays")
	l = lease(t, s)
	d, ok := l.Plan().Lookup("echo")
	require.True(t, ok)
	require.Equal(t, "Echoes its text.", d.Description())
	require.NoError(t, call(t, l, "echo", map[string]string{"text": "hi"}))
	require.NoError(t, l.Release(context.Background()))
}

func TestM5_ReconnectActivatesAFreshConnectionAndTheOldOneEndsWhenUnleased(t *testing.T) {
	s, evs := newSource(t, fixtureConfig(t))
	running := lease(t, s)
	oldPID := s.Current().Generations[0].Unit.(*unit).c.srv.PID()

	info, err := s.Reconnect(context.Background(), 0)
	require.NoError(t, err)
	require.Equal(t, "fixture-g2", info.ID)
	evs.next(t, toolgen.EventActivated)
	newPID := s.Current().Generations[0].Unit.(*unit).c.srv.PID()
	require.NotEqual(t, oldPID, newPID)

	// The leased pair still calls its own connection.
	require.NoError(t, call(t, running, "echo", map[string]string{"text": "old"}))
	require.NoError(t, running.Release(context.Background()))
	require.Equal(t, "fixture-g1", evs.next(t, toolgen.EventDrained).Generation)
	require.Error(t, call(t, running, "echo", map[string]string{"text": "late"}), "a released lease's old generation serves no more")
}
