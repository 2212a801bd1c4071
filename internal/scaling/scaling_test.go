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
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
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
			perUnit(b, n, "turn", func() {
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

// perUnit runs one run or pair per iteration and reports its cost per
// unit (turn, round) of its n.
func perUnit(b *testing.B, units int, unit string, run func()) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	b.ReportAllocs()
	for b.Loop() {
		run()
	}
	runtime.ReadMemStats(&m1)
	n := float64(b.N * units)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/"+unit)
	b.ReportMetric(float64(m1.Mallocs-m0.Mallocs)/n, "allocs/"+unit)
}

// BenchmarkScalingPairRounds is one ReviewLoop pair of rounds=N rounds on
// one Team (as BenchmarkPairRelay): the reviewer asks for changes N-1
// times and approves in round N. ns/round and allocs/round must stay flat.
func BenchmarkScalingPairRounds(b *testing.B) {
	for _, n := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("rounds=%d", n), func(b *testing.B) {
			plans, err := enginetest.Plan("plan-bench")
			if err != nil {
				b.Fatal(err)
			}
			def := func(name string) engine.Definition {
				d, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "scripted-1", System: "Be brief.", MaxTurns: 4})
				if err != nil {
					b.Fatal(err)
				}
				return d
			}
			// Every draft and review differs: the pair ends a loop that
			// repeats itself (loop_detected).
			drafts, reviews := make([][]model.Item, 0, n), make([][]model.Item, 0, n)
			for i := range n {
				drafts = append(drafts, enginetest.Answer("Draft "+strconv.Itoa(i+1)+"."))
				if i < n-1 {
					reviews = append(reviews, enginetest.Answer("Shorter than draft "+strconv.Itoa(i+1)+"."))
				}
			}
			reviews = append(reviews, enginetest.Answer("Good.\nAPPROVED"))
			writer := enginetest.NewProvider(drafts...)
			writer.Cycle = true
			reviewer := enginetest.NewProvider(reviews...)
			reviewer.Cycle = true // the script is exactly one pair long
			ids, clock := &id.Counter{}, &enginetest.Clock{}
			cfg := orchestrator.Config{
				ID:    "pair-bench",
				Plans: plans,
				First: workers.Config{Role: "writer", Definition: def("writer"),
					Engine: engine.Config{Provider: writer, IDs: ids, Clock: clock}},
				Second: workers.Config{Role: "reviewer", Definition: def("reviewer"),
					Engine: engine.Config{Provider: reviewer, IDs: ids, Clock: clock}},
				Pattern:   orchestrator.ReviewLoop,
				MaxRounds: n,
				Task:      "Say hello.",
				Timeline:  orchestrator.TimelineConfig{Delivery: orchestrator.AfterRun},
			}
			ctx := context.Background()
			team, err := orchestrator.NewTeam(cfg)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = team.Close(ctx) })
			perUnit(b, n, "round", func() {
				p, err := team.Run(ctx, cfg.ID, cfg.Task)
				if err != nil {
					b.Fatal(err)
				}
				res, err := p.Wait(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if res.Rounds != n || res.Reason != orchestrator.ReasonApproved {
					b.Fatalf("%d rounds, %v", res.Rounds, res.Reason)
				}
			})
		})
	}
}
