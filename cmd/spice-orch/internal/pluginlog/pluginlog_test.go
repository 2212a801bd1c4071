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
	r, err := NewRecorder("pair-x", c, func() time.Time { return clock }, 0)
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

	var recorded []Recorded
	for _, e := range c.evs[:4] {
		re := Recorded{Kind: e.Kind(), Time: e.Time()}
		require.NoError(t, json.Unmarshal(e.Payload().AppendJSON(nil), &re.Event))
		recorded = append(recorded, re)
	}
	require.Equal(t, Generation{Generation: "wordcount-g1", Name: "wordcount", Version: "1.0.0",
		SHA256: strings.Repeat("ab", 32), Path: "/opt/wc", PID: 11}, recorded[0].Generations[0])
	require.Equal(t, "plan-pair-x-2", recorded[3].PlanID)
}
