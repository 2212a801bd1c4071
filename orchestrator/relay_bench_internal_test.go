package orchestrator

import (
	"context"
	"io"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
)

// finishedRun is one ended text run (seven events) to relay from.
func finishedRun(b *testing.B) (*engine.Run, uint64) {
	b.Helper()
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		b.Fatal(err)
	}
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: "w", Model: "m", MaxTurns: 2})
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(engine.Config{Provider: enginetest.NewProvider(enginetest.Answer("Hello there.")),
		Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
	if err != nil {
		b.Fatal(err)
	}
	msg, err := message.User("Say hello.")
	if err != nil {
		b.Fatal(err)
	}
	r, err := e.Run(context.Background(), def, engine.Input{Message: msg})
	if err != nil {
		b.Fatal(err)
	}
	res, err := r.Wait(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return r, res.LastSeq
}

// BenchmarkRelayCopyRun is the timeline's share of BenchmarkPairRelay:
// AfterRun relaying of two text runs (14 events) into a new timeline.
func BenchmarkRelayCopyRun(b *testing.B) {
	r, last := finishedRun(b)
	tc := TimelineConfig{}
	if err := tc.normalize(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		p := &Pair{cfg: &settings{Pattern: Relay, Delivery: AfterRun, Roles: &[2]string{"w", "v"}}, crew: new(crew)}
		if err := p.tl.open(context.Background(), &tc, "pair-1", p.cfg); err != nil {
			b.Fatal(err)
		}
		p.crew.lend(p)
		p.copyRun(0, r, last)
		p.copyRun(0, r, last)
		if p.tl.failure.Load() != nil || p.tl.log.Stats().LastSeq != 2*last {
			b.Fatalf("relayed %d events, failure %v", p.tl.log.Stats().LastSeq, p.tl.failure.Load())
		}
	}
}

// BenchmarkRelayReadOnly is the reading part of BenchmarkRelayCopyRun: the
// same two runs' events through a subscription each, and nothing else.
func BenchmarkRelayReadOnly(b *testing.B) {
	r, _ := finishedRun(b)
	b.ReportAllocs()
	for b.Loop() {
		for range 2 {
			sub, err := r.Subscribe(context.Background(), 0)
			if err != nil {
				b.Fatal(err)
			}
			for {
				if _, err := sub.Next(context.Background()); err == io.EOF {
					break
				} else if err != nil {
					b.Fatal(err)
				}
			}
			sub.Close()
		}
	}
}
