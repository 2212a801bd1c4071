package enginetest

import (
	"context"

	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Tool is a tool built from a definition and a function.
type Tool struct {
	Def tool.Definition
	Fn  func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error)
}

// Definition returns t.Def.
func (t Tool) Definition() tool.Definition { return t.Def }

// Execute calls t.Fn.
func (t Tool) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	return t.Fn(ctx, call, r)
}

// Echo is a read-only tool named "echo" that returns its arguments.
func Echo() Tool {
	return Tool{
		Def: must(tool.NewDefinition(tool.DefinitionConfig{Name: "echo", Description: "Echoes its arguments.", Effect: tool.ReadOnly, Replay: tool.Safe})),
		Fn: func(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
			return tool.NewResult(call.ID(), call.ArgumentsString())
		},
	}
}

// Plan builds a plan with the given ID over a canonical dispatcher of tools
// and returns an in-memory source serving it.
func Plan(planID string, tools ...tool.Tool) (*plan.Memory, error) {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	if err != nil {
		return nil, err
	}
	p, err := plan.New(plan.ID(planID), d)
	if err != nil {
		return nil, err
	}
	return plan.NewMemory(p)
}
