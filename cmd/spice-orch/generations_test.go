package main

import (
	"encoding/json"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestP6_GenerationIsFindableFromThePlanID: a recorded plugin pair keeps
// its plugin host's generation and lease events in the store beside the
// timeline, and the plan ID of each run.started leads to the generation
// (name, version, digest, PID) that served it, in the store and in
// `runs show`.
func TestP6_GenerationIsFindableFromThePlanID(t *testing.T) {
	t.Parallel()
	specPath, _, sum := pinnedExample(t)
	e := env(t)
	r := spiceOrch(t, e, "run", specPath)
	require.Equal(t, 0, r.code, r.stderr)
	m := regexp.MustCompile(`recorded: spice-orch runs show (pair-\S+)`).FindStringSubmatch(r.stdout)
	require.NotNil(t, m, r.stdout)
	pairID := m[1]
	planID := "plan-" + pairID + "-1"

	// The pair timeline is as before: its runs name the plan.
	r = spiceOrch(t, e, "runs", "replay", "--json", pairID)
	require.Equal(t, 0, r.code, r.stderr)
	runs := 0
	for _, l := range timeline(t, r.stdout) {
		if l.Kind == "run.started" {
			require.Equal(t, planID, field[string](t, l.Relay.Payload, "plan_id"))
			runs++
		}
	}
	require.Equal(t, 2, runs)

	// The plugin log maps that plan ID to its generation, then drains it.
	r = spiceOrch(t, e, "runs", "replay", "--json", pairID+"/plugins")
	require.Equal(t, 0, r.code, r.stderr)
	var kinds []string
	var pid int
	for i, ln := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Seq     int    `json:"seq"`
			Kind    string `json:"kind"`
			Payload struct {
				PlanID      string `json:"plan_id"`
				Generation  string `json:"generation"`
				Generations []struct {
					Generation, Name, Version, SHA256, Path string
					PID                                     int
				} `json:"generations"`
			} `json:"payload"`
		}
		require.NoError(t, json.Unmarshal([]byte(ln), &ev), ln)
		require.Equal(t, i+1, ev.Seq)
		kinds = append(kinds, ev.Kind)
		switch ev.Kind {
		case "plan.activated":
			require.Equal(t, planID, ev.Payload.PlanID)
			require.Len(t, ev.Payload.Generations, 1)
			g := ev.Payload.Generations[0]
			require.Equal(t, "wordcount-g1", g.Generation)
			require.Equal(t, "wordcount", g.Name)
			require.Equal(t, "1.0.0", g.Version)
			require.Equal(t, sum, g.SHA256)
			require.Positive(t, g.PID)
			pid = g.PID
		default:
			require.Equal(t, "wordcount-g1", ev.Payload.Generation)
		}
	}
	require.Equal(t, []string{"plan.activated", "generation.draining", "generation.drained"}, kinds)

	r = spiceOrch(t, e, "runs", "show", pairID)
	require.Equal(t, 0, r.code, r.stderr)
	require.Contains(t, r.stdout, "plugin generations (by plan)\n  "+planID+" (2 runs)\n    wordcount-g1  wordcount 1.0.0  sha256 "+sum[:12]+"  pid ")
	require.Regexp(t, `(?s)plugin events\n  \S+  plan\.activated +`+regexp.QuoteMeta(planID)+
		`\n  \S+  generation\.draining +wordcount-g1\n  \S+  generation\.drained +wordcount-g1\n`, r.stdout)
	require.Contains(t, r.stdout, "pid "+strconv.Itoa(pid)+"\n")
}
