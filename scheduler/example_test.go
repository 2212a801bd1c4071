package scheduler_test

import (
	"context"
	"fmt"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/workers"
)

// A host embeds the scheduler: it queues review jobs, each a writer and a
// reviewer pair, with at most two pairs and one model call at a time, then
// follows one job's timeline, waits for every job and drains the
// scheduler. The scripted providers stand in for real models.
func Example() {
	ctx := context.Background()
	plans, err := enginetest.Plan("plan-1")
	if err != nil {
		panic(err)
	}
	writerDef, _ := engine.NewDefinition(engine.DefinitionConfig{
		Name: "writer", Model: "scripted-1", System: "Write a haiku.", MaxTurns: 4})
	reviewerDef, _ := engine.NewDefinition(engine.DefinitionConfig{
		Name: "reviewer", Model: "scripted-1", System: "Review the haiku.", MaxTurns: 4})
	writer := enginetest.NewProvider(enginetest.Answer("Autumn moon rises"))
	reviewer := enginetest.NewProvider(enginetest.Answer("Lovely."))
	writer.Cycle, reviewer.Cycle = true, true
	ids, clock := &id.Counter{}, &enginetest.Clock{}

	// One config serves every job: the scheduler reads it when a job
	// starts and names each pair after its job.
	haiku := &orchestrator.Config{
		Plans: plans,
		First: workers.Config{Role: "writer", Definition: writerDef,
			Engine: engine.Config{Provider: writer, IDs: ids, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: reviewerDef,
			Engine: engine.Config{Provider: reviewer, IDs: ids, Clock: clock}},
		Pattern: orchestrator.Relay,
		Task:    "A haiku about the sea.",
	}

	s, err := scheduler.New(scheduler.Config{
		Pairs: 2, ModelOps: 1, Queue: 100, IDs: scheduler.Sequential("review-")})
	if err != nil {
		panic(err)
	}
	var jobs []string
	for range 3 {
		jobID, err := s.Submit(ctx, scheduler.Job{Pair: haiku})
		if err != nil {
			panic(err)
		}
		jobs = append(jobs, jobID)
	}

	sub, err := s.Subscribe(ctx, jobs[0], 0)
	if err != nil {
		panic(err)
	}
	for e, err := range sub.All(ctx) {
		if err != nil {
			panic(err)
		}
		if orchestrator.Terminal(e.Kind()) {
			fmt.Println(jobs[0], "timeline ends with", e.Kind())
		}
	}

	for _, jobID := range jobs {
		info, err := s.Wait(ctx, jobID)
		if err != nil {
			panic(err)
		}
		fmt.Println(info.ID, info.State, info.Result.Reason, info.Result.Usage.Total(), "tokens:", info.Result.Final.Text())
	}
	if err := s.Close(ctx); err != nil {
		panic(err)
	}
	st := s.Stats()
	fmt.Println("completed:", st.Completed, "queued:", st.Queued, "running:", st.Running)
	// Output:
	// review-1 timeline ends with pair.completed
	// review-1 completed completed 30 tokens: Lovely.
	// review-2 completed completed 30 tokens: Lovely.
	// review-3 completed completed 30 tokens: Lovely.
	// completed: 3 queued: 0 running: 0
}
