package engine_test

import (
	"context"
	"fmt"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// A host builds one engine from injected parts, starts a run on its own
// goroutine, follows the run's events from the first one, and waits for
// the result. The scripted provider stands in for a real model: it calls
// the echo tool once, then answers. With a stepping clock and a counter
// for IDs the same input gives the same events every time.
func ExampleEngine_Start() {
	ctx := context.Background()
	plans, err := enginetest.Plan("plan-1", enginetest.Echo()) // the tools, frozen into a plan
	if err != nil {
		panic(err)
	}
	eng, err := engine.New(engine.Config{
		Provider: enginetest.NewProvider(
			[]model.Item{enginetest.Call("call-1", "echo", `{"text":"hello"}`), enginetest.Done(10, 5)},
			enginetest.Answer("The tool said hello."),
		),
		Plans: plans,
		IDs:   &id.Counter{},
		Clock: &enginetest.Clock{},
	})
	if err != nil {
		panic(err)
	}
	defer eng.Close(ctx)
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: "assistant", Model: "scripted-1", MaxTurns: 4})
	if err != nil {
		panic(err)
	}
	msg, err := message.User("Say hello through the tool.")
	if err != nil {
		panic(err)
	}

	run, err := eng.Start(ctx, def, engine.Input{Message: msg})
	if err != nil {
		panic(err)
	}
	sub, err := run.Subscribe(ctx, 0) // replay from the first event, then tail
	if err != nil {
		panic(err)
	}
	events, err := enginetest.ReadAll(ctx, sub) // until the run's log closes
	if err != nil {
		panic(err)
	}
	for _, e := range events {
		fmt.Println(e.Seq(), e.Kind())
	}
	res, err := run.Wait(ctx)
	fmt.Println(res.Status, res.Turns, res.Final.Text(), err)
	// Output:
	// 1 run.started
	// 2 turn.started
	// 3 model.started
	// 4 model.completed
	// 5 tool.started
	// 6 tool.completed
	// 7 turn.completed
	// 8 turn.started
	// 9 model.started
	// 10 model.text_delta
	// 11 model.completed
	// 12 turn.completed
	// 13 run.completed
	// completed 2 The tool said hello. <nil>
}
