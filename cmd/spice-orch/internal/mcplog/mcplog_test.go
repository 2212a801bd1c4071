package mcplog

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/toolgen"
)

// The MCP log of a pair with an HTTP server, recorded in a real store
// and read back: every event says the server is unpinned (the field is
// always written), a plan.activated names the generations and their
// tools, and events over the bound are counted, not recorded.
func TestM1_MCPLogReadsBackUnpinnedOnEveryEvent(t *testing.T) {
	ctx := t.Context()
	st, err := store.OpenConfig(ctx, store.Config{Path: filepath.Join(t.TempDir(), "store.db")})
	require.NoError(t, err)
	defer st.Close()
	clock := time.Date(2026, 12, 3, 15, 0, 0, 0, time.UTC)
	r, err := NewRecorder("pair-m", st, func() time.Time { return clock }, 0)
	require.NoError(t, err)

	echo := client.Info{Server: "remote", Name: "echo", Digest: "d1", Effect: tool.Mutating, Replay: tool.Unsafe, From: "default"}
	r.OnEvent(servers.Event{Event: toolgen.Event{Kind: toolgen.EventActivated, Plan: "mcp-1"},
		Generations: []servers.Generation{{ID: "remote-g1", Server: "remote", Tools: []client.Info{echo}}}})
	require.NoError(t, r.Flush(ctx))
	r.OnEvent(servers.Event{Event: toolgen.Event{Kind: toolgen.EventDraining, Generation: "remote-g1"}, Server: "remote"})
	for range maxEvents + 2 {
		r.OnEvent(servers.Event{Event: toolgen.Event{Kind: toolgen.EventForced, Generation: "remote-g1", InFlight: 1}, Server: "remote"})
	}
	require.NoError(t, r.Flush(ctx))
	require.ErrorContains(t, r.Close(ctx), "3 MCP events over the bound of 256 were not recorded")

	got, err := Read(ctx, st, "pair-m")
	require.NoError(t, err)
	require.Len(t, got, 1+maxEvents)
	require.Equal(t, string(toolgen.EventActivated), got[0].Kind)
	require.Equal(t, "mcp-1", got[0].PlanID)
	require.Equal(t, []Generation{{Generation: "remote-g1", Server: "remote",
		Tools: []Tool{{Name: "echo", Digest: "d1", Effect: "mutating", Replay: "unsafe", From: "default"}}}}, got[0].Generations)
	require.Equal(t, string(toolgen.EventDraining), got[1].Kind)
	for _, e := range got[1:] {
		require.Equal(t, "remote", e.Server)
		require.False(t, e.Pinned)
		require.True(t, e.Time.Equal(clock))
	}

	none, err := Read(ctx, st, "pair-without-mcp")
	require.NoError(t, err)
	require.Empty(t, none)
}
