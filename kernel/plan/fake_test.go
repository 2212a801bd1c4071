package plan_test

import (
	"context"
	"encoding/json"
	"iter"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// fakeDispatcher yields its definitions in registration order (not name
// order) so tests can show that the plan does not depend on that order.
type fakeDispatcher struct {
	defs []tool.Definition
}

var _ tool.Dispatcher = (*fakeDispatcher)(nil)

func (f *fakeDispatcher) Definitions() iter.Seq[tool.Definition] { return slices.Values(f.defs) }

func (f *fakeDispatcher) Lookup(name string) (tool.Definition, bool) {
	for _, d := range f.defs {
		if d.Name() == name {
			return d, true
		}
	}
	return tool.Definition{}, false
}

func (f *fakeDispatcher) Dispatch(_ context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
	return tool.NewResult(call.ID(), "ok")
}

// baseConfigs is a small plan with one tool of each kind.
func baseConfigs() []tool.DefinitionConfig {
	return []tool.DefinitionConfig{
		{
			Name: "read_file", Description: "Read a file.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
			Effect: tool.ReadOnly, Replay: tool.Safe,
			Capabilities: []tool.Capability{tool.FilesystemRead},
		},
		{
			Name: "write_file", Description: "Write a file.",
			Schema: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"},"text":{"type":"string"}}}`),
			Effect: tool.Mutating, Replay: tool.Idempotent,
			Capabilities: []tool.Capability{tool.FilesystemWrite, tool.FilesystemRead},
		},
		{
			Name: "run", Description: "Run a command.",
			Effect: tool.Mutating, Replay: tool.Unsafe,
			Capabilities: []tool.Capability{tool.ProcessExecute},
		},
	}
}

func defsOf(t testing.TB, cfgs []tool.DefinitionConfig) []tool.Definition {
	t.Helper()
	defs := make([]tool.Definition, 0, len(cfgs))
	for _, c := range cfgs {
		d, err := tool.NewDefinition(c)
		require.NoError(t, err)
		defs = append(defs, d)
	}
	return defs
}

func dispatcherOf(t testing.TB, cfgs []tool.DefinitionConfig) *fakeDispatcher {
	t.Helper()
	return &fakeDispatcher{defs: defsOf(t, cfgs)}
}

func newPlan(t testing.TB, planID plan.ID, cfgs []tool.DefinitionConfig) plan.Plan {
	t.Helper()
	p, err := plan.New(planID, dispatcherOf(t, cfgs))
	require.NoError(t, err)
	return p
}

func collect(p plan.Plan) []tool.Definition { return slices.Collect(p.Definitions()) }

func names(p plan.Plan) []string {
	var out []string
	for d := range p.Definitions() {
		out = append(out, d.Name())
	}
	return out
}
