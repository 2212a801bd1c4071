package orchestrator_test

import (
	"context"
	"fmt"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// A host builds a writer and a reviewer with plain constructors and runs
// them as a review loop. The scripted providers stand in for real models:
// the reviewer asks for a change once, then approves.
func Example() {
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		panic(err)
	}
	writerDef, _ := engine.NewDefinition(engine.DefinitionConfig{
		Name: "writer", Model: "scripted-1", System: "Write a haiku.", MaxTurns: 4})
	reviewerDef, _ := engine.NewDefinition(engine.DefinitionConfig{
		Name: "reviewer", Model: "scripted-1", System: "Review the haiku; answer APPROVED when it is good.", MaxTurns: 4})
	clock := &enginetest.Clock{}

	pair, err := orchestrator.Run(context.Background(), orchestrator.Config{
		ID:    "pair-1",
		Plans: plans,
		First: workers.Config{Role: "writer", Definition: writerDef, Engine: engine.Config{
			Provider: enginetest.NewProvider(
				enginetest.Answer("Autumn moon rises"),
				enginetest.Answer("Autumn moon rises / over the quiet harbor / boats dream of the sea")),
			IDs: &id.Counter{Prefix: "w/"}, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: reviewerDef, Engine: engine.Config{
			Provider: enginetest.NewProvider(
				enginetest.Answer("Too short: write all three lines."),
				enginetest.Answer("Lovely.\nAPPROVED")),
			IDs: &id.Counter{Prefix: "r/"}, Clock: clock}},
		Pattern: orchestrator.ReviewLoop,
		Task:    "A haiku about the sea.",
	})
	if err != nil {
		panic(err)
	}
	res, err := pair.Wait(context.Background())
	fmt.Println("reason:", res.Reason, "rounds:", res.Rounds, "runs:", res.Runs, "error:", err)
	fmt.Println("final:", res.Final.Text())
	fmt.Println("tokens:", res.Usage.Total(), "plan:", pair.Plan().ID)
	// Output:
	// reason: approved rounds: 2 runs: 4 error: <nil>
	// final: Autumn moon rises / over the quiet harbor / boats dream of the sea
	// tokens: 60 plan: plan-1
}

// A host that plays the same two workers task after task builds a Team
// once; each pair borrows the workers' engines and gives them back.
func ExampleTeam() {
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		panic(err)
	}
	def, _ := engine.NewDefinition(engine.DefinitionConfig{
		Name: "translator", Model: "scripted-1", System: "Translate.", MaxTurns: 4})
	answers := func(text string) *enginetest.Provider {
		p := enginetest.NewProvider(enginetest.Answer(text))
		p.Cycle = true // the same answer to every task
		return p
	}
	clock := &enginetest.Clock{}
	team, err := orchestrator.NewTeam(orchestrator.Config{
		Plans: plans,
		First: workers.Config{Role: "translator", Definition: def, Engine: engine.Config{
			Provider: answers("Bonjour."), IDs: &id.Counter{Prefix: "t/"}, Clock: clock}},
		Second: workers.Config{Role: "proofreader", Definition: def, Engine: engine.Config{
			Provider: answers("Bonjour !"), IDs: &id.Counter{Prefix: "p/"}, Clock: clock}},
		Pattern: orchestrator.Relay,
	})
	if err != nil {
		panic(err)
	}
	defer team.Close(context.Background())
	for i, task := range []string{"Hello.", "Good morning."} {
		pair, err := team.Run(context.Background(), fmt.Sprintf("pair-%d", i+1), task)
		if err != nil {
			panic(err)
		}
		res, err := pair.Wait(context.Background())
		fmt.Println(pair.ID(), res.Reason, res.Final.Text(), err)
	}
	// Output:
	// pair-1 completed Bonjour ! <nil>
	// pair-2 completed Bonjour ! <nil>
}
