package scaling_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// BenchmarkScalingRunTurns is one run of turns=N turns on a scripted
// provider: N-1 turns that each call a tool (echo) and a last one that
// answers. ns/turn and allocs/turn must stay flat as N grows: a turn must
// not cost more because the history before it is longer.
func BenchmarkScalingRunTurns(b *testing.B) {
	for _, n := range []int{1, 8, 32, 60} {
		b.Run(fmt.Sprintf("turns=%d", n), func(b *testing.B) {
			script := make([][]model.Item, 0, n)
			for i := range n - 1 {
				script = append(script, []model.Item{enginetest.Call("call-"+strconv.Itoa(i+1), "echo", `{"x":1}`), enginetest.Done(10, 5)})
			}
			script = append(script, enginetest.Answer("done"))
			plans, err := enginetest.Plan("plan-bench", enginetest.Echo())
			if err != nil {
				b.Fatal(err)
			}
			p := enginetest.NewProvider(script...)
			p.Cycle = true // the script is exactly one run long
			e, err := engine.New(engine.Config{Provider: p, Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = e.Close(context.Background()) })
			def, err := engine.NewDefinition(engine.DefinitionConfig{Name: "assistant", Model: "scripted-1", System: "Be brief.", MaxTurns: n})
			if err != nil {
				b.Fatal(err)
			}
			msg, err := message.User("hello")
			if err != nil {
				b.Fatal(err)
			}
			in := engine.Input{Message: msg}
			ctx := context.Background()
			perTurn(b, n, func() {
				r, err := e.Run(ctx, def, in)
				if err != nil {
					b.Fatal(err)
				}
				res, err := r.Wait(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if res.Turns != n {
					b.Fatalf("%d turns", res.Turns)
				}
			})
		})
	}
}

// perTurn runs one run per iteration and reports its cost per turn.
func perTurn(b *testing.B, turns int, run func()) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	runtime.ReadMemStats(&m1)
	n := float64(b.N * turns)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/turn")
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/turn")
}
