package engine_test

import (
	"context"
	"errors"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// benchEngine builds an engine with a cycling scripted provider and no
// observers, so that it measures the engine's own cost.
func benchEngine(b *testing.B, tools []tool.Tool, script ...[]model.Item) *engine.Engine {
	b.Helper()
	plans, err := enginetest.Plan("plan-bench", tools...)
	if err != nil {
		b.Fatal(err)
	}
	p := enginetest.NewProvider(script...)
	p.Cycle = true
	e, err := engine.New(engine.Config{Provider: p, Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	return e
}

// benchRun runs the loop on the benchmark goroutine (Engine.Run).
func benchRun(b *testing.B, e *engine.Engine, turns int) {
	def := definition(b, turns)
	in := engine.Input{Message: user(b, "hello")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.Run(ctx, def, in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEngineStartWait is the text run through Start and Wait: the
// same work plus the switch to the run's own goroutine.
func BenchmarkEngineStartWait(b *testing.B) {
	e := benchEngine(b, nil, enginetest.Answer("Hello there."))
	def := definition(b, 4)
	in := engine.Input{Message: user(b, "hello")}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		r, err := e.Start(ctx, def, in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Wait(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEngineTextRun(b *testing.B) {
	e := benchEngine(b, nil, enginetest.Answer("Hello there."))
	benchRun(b, e, 4)
}

func BenchmarkEngineToolRound(b *testing.B) {
	e := benchEngine(b, []tool.Tool{enginetest.Echo()},
		[]model.Item{enginetest.Call("call-1", "echo", `{"x":1}`), enginetest.Done(10, 5)},
		enginetest.Answer("done"))
	benchRun(b, e, 4)
}

// cancellingProvider cancels the run from inside its model operation, so
// the benchmark measures the cancellation path of a run: the stream sees
// the cancellation, and the model operation, turn and run end cancelled.
type cancellingProvider struct {
	inner  *enginetest.Provider
	cancel context.CancelFunc
}

func (p *cancellingProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	p.cancel()
	return p.inner.Stream(ctx, req)
}

func BenchmarkEngineCancel(b *testing.B) {
	plans, err := enginetest.Plan("plan-bench")
	if err != nil {
		b.Fatal(err)
	}
	inner := enginetest.NewProvider(enginetest.Answer("never read"))
	inner.Cycle = true
	p := &cancellingProvider{inner: inner}
	e, err := engine.New(engine.Config{Provider: p, Plans: plans, IDs: &id.Counter{}, Clock: &enginetest.Clock{}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	def := definition(b, 4)
	in := engine.Input{Message: user(b, "hello")}
	b.ReportAllocs()
	for b.Loop() {
		ctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		r, err := e.Run(ctx, def, in)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := r.Wait(context.Background()); !errors.Is(err, engine.ErrCancelled) {
			b.Fatalf("want cancelled, got %v", err)
		}
	}
}
