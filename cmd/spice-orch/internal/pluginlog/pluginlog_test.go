package pluginlog

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/store"
)

type captured struct {
	mu  sync.Mutex
	evs []eventlog.Event
}

func (c *captured) Observe(_ context.Context, e eventlog.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.evs = append(c.evs, e)
	return nil
}

func genPlan(id, gen string, pid int) host.GenerationPlan {
	return host.GenerationPlan{Plan: plan.ID(id), Generations: []host.GenerationInfo{{ID: gen,
		Manifest: host.Manifest{Name: "wordcount", Version: "1.0.0", Digest: strings.Repeat("ab", 32), Path: "/opt/wc"}, PID: pid}}}
}

// A restart mid-pair: the first activation comes before the host is known
// (resolved at flush), the second is resolved when it happens (a later
// activation could evict it), in the host's order and under its kinds;
// events over the bound are counted, not recorded.
func TestP6_PluginLogRecordsARestartWithBothPlans(t *testing.T) {
	c := &captured{}
	clock := time.Date(2026, 12, 1, 21, 22, 15, 0, time.UTC)
	r, err := NewPluginRecorder("pair-x", c, func() time.Time { return clock }, 0)
	require.NoError(t, err)
	plans := map[plan.ID]host.GenerationPlan{"plan-pair-x-1": genPlan("plan-pair-x-1", "wordcount-g1", 11)}
	lookup := func(id plan.ID) (host.GenerationPlan, bool) { gp, ok := plans[id]; return gp, ok }

	r.OnEvent(host.Event{Kind: host.EventActivated, Plan: "plan-pair-x-1"})
	r.SetLookup(lookup)
	require.NoError(t, r.Flush(t.Context()))
	plans["plan-pair-x-2"] = genPlan("plan-pair-x-2", "wordcount-g2", 22)
	r.OnEvent(host.Event{Kind: host.EventDead, Generation: "wordcount-g1", Reason: "exit status 3"})
	r.OnEvent(host.Event{Kind: host.EventRestarted, Generation: "wordcount-g2", Reason: "replaces wordcount-g1"})
	r.OnEvent(host.Event{Kind: host.EventActivated, Plan: "plan-pair-x-2"})
	delete(plans, "plan-pair-x-2") // evicted before the flush: resolved already
	require.NoError(t, r.Flush(t.Context()))

	var kinds, payloads []string
	for _, e := range c.evs {
		require.Equal(t, "pair-x/plugins", e.Log())
		kinds = append(kinds, e.Kind())
		payloads = append(payloads, string(e.Payload().AppendJSON(nil)))
	}
	require.Equal(t, []string{"plan.activated", "generation.dead", "generation.restarted", "plan.activated"}, kinds)
	require.Equal(t, `{"plan_id":"plan-pair-x-1","generations":[{"generation":"wordcount-g1","slot":0,"name":"wordcount","version":"1.0.0","sha256":"`+
		strings.Repeat("ab", 32)+`","path":"/opt/wc","pid":11}],"slot":0}`, payloads[0])
	require.Equal(t, `{"generation":"wordcount-g1","slot":0,"reason":"exit status 3"}`, payloads[1])
	require.Contains(t, payloads[3], `"generation":"wordcount-g2"`)
	require.Contains(t, payloads[3], `"pid":22`)

	for range maxPluginEvents + 2 {
		r.OnEvent(host.Event{Kind: host.EventDraining, Generation: "wordcount-g2"})
	}
	require.NoError(t, r.Flush(t.Context()))
	require.Len(t, c.evs, 4+maxPluginEvents)
	require.ErrorContains(t, r.Close(t.Context()), "2 plugin events over the bound")

	var b strings.Builder
	var recorded []recordedPluginEvent
	for _, e := range c.evs[:4] {
		re := recordedPluginEvent{Kind: e.Kind(), Time: e.Time()}
		require.NoError(t, json.Unmarshal(e.Payload().AppendJSON(nil), &re.PluginEvent))
		recorded = append(recorded, re)
	}
	ShowPlugins(&b, recorded, []store.RunSummary{{ID: "pair-x/writer/run-1", PlanID: "plan-pair-x-1"},
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
