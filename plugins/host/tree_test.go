package host

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/proctree"
)

// withoutNamespaces launches without a PID namespace for one test: the
// fallback of a system that refuses one.
func withoutNamespaces(t *testing.T) {
	was := proctree.SetNamespaces(false)
	t.Cleanup(func() { proctree.SetNamespaces(was) })
}

// escaped returns the plugin's descendants that left its session.
func escaped(t *testing.T, p *Plugin) []proctree.Proc {
	t.Helper()
	leader, ok := proctree.Of(p.PID())
	require.True(t, ok)
	var out []proctree.Proc
	for _, d := range proctree.Descendants(p.PID()) {
		if proctree.Session(d) != proctree.Session(leader) {
			out = append(out, d)
		}
	}
	return out
}

// A descendant that called setsid keeps the plugin's pipes open and is
// out of its process group: Close still returns within its bound and the
// descendant is gone, in a PID namespace and without one.
func TestP7_CloseEndsADescendantInItsOwnSession(t *testing.T) {
	for _, ns := range []bool{true, false} {
		name := map[bool]string{true: "pid namespace", false: "process group and tree"}[ns]
		t.Run(name, func(t *testing.T) {
			if !ns {
				withoutNamespaces(t)
			}
			cfg := config(t, fixtureV1, "setsid_grandchild")
			cfg.ShutdownGrace = 500 * time.Millisecond
			p, err := Launch(t.Context(), cfg)
			require.NoError(t, err)
			out := escaped(t, p)
			require.Len(t, out, 1, "the fixture's descendant in its own session")
			closed := make(chan struct{})
			go func() {
				_ = p.Close()
				close(closed)
			}()
			bound := time.NewTimer(2*cfg.ShutdownGrace + 2*killWait)
			defer bound.Stop()
			select {
			case <-closed:
			case <-bound.C:
				t.Fatal("Close did not return within its bound")
			}
			requireGone(t, p.PID())
			requireGone(t, out[0].PID)
			require.False(t, proctree.Alive(out[0]))
		})
	}
}
