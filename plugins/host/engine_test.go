package host

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// compiledEcho is a compiled tool beside the plugin's in one plan.
func compiledEcho(t testing.TB) tool.Tool {
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "compiled.echo", Effect: tool.ReadOnly, Replay: tool.Safe})
	require.NoError(t, err)
	return enginetest.Tool{Def: def, Fn: func(_ context.Context, c tool.Call, _ tool.Reporter) (tool.Result, error) {
		return tool.NewResult(c.ID(), "compiled:"+c.ArgumentsString())
	}}
}

func startRun(t *testing.T, tools []tool.Tool, rec *enginetest.Recorder, script ...[]model.Item) *engine.Run {
	t.Helper()
	plans, err := enginetest.Plan("plan-1", tools...)
	require.NoError(t, err)
	eng, err := engine.New(engine.Config{
		Provider: enginetest.NewProvider(script...), Plans: plans, IDs: &id.Counter{},
		Clock: &enginetest.Clock{}, Required: []eventlog.Observer{rec},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = eng.Close(context.Background()) })
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: "assistant", Model: "scripted-1", MaxTurns: 4})
	require.NoError(t, err)
	msg, err := message.User("go")
	require.NoError(t, err)
	r, err := eng.Start(context.Background(), def, engine.Input{Message: msg})
	require.NoError(t, err)
	return r
}

func TestP4_PluginAndCompiledToolsInOneLeasedPlan(t *testing.T) {
	p := launch(t, config(t, fixtureV1, ""))
	rec := &enginetest.Recorder{}
	r := startRun(t, append(p.Tools(), compiledEcho(t)), rec,
		[]model.Item{enginetest.Call("call-1", "echo", `{"text":"from the plugin"}`), enginetest.Call("call-2", "compiled.echo", `{}`), enginetest.Done(1, 1)},
		enginetest.Answer("done"))
	_, err := r.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, []string{
		"run.started", "turn.started", "model.started", "model.completed",
		"tool.started", "tool.completed", "tool.started", "tool.completed", "turn.completed",
		"turn.started", "model.started", "model.text_delta", "model.completed", "turn.completed", "run.completed",
	}, rec.Kinds())
}

func TestP4_RunCancellationMidCallEndsWithOneTerminal(t *testing.T) {
	p := launch(t, config(t, fixtureV1, ""))
	rec := &enginetest.Recorder{}
	cancelled := make(chan struct{})
	var run *engine.Run
	ready := make(chan struct{})
	rec.Hook = func(_ context.Context, e eventlog.Event) error {
		if e.Kind() == "tool.progress" {
			<-ready
			run.Cancel()
			close(cancelled)
		}
		return nil
	}
	run = startRun(t, p.Tools(), rec,
		[]model.Item{enginetest.Call("call-1", "slow", `{"millis":60000}`), enginetest.Done(1, 1)},
		enginetest.Answer("never"))
	close(ready)
	start := time.Now()
	_, err := run.Wait(context.Background())
	require.ErrorIs(t, err, engine.ErrCancelled)
	<-cancelled
	require.Less(t, time.Since(start), 30*time.Second)
	terminals := 0
	for _, k := range rec.Kinds() {
		if k == "tool.failed" || k == "tool.completed" || k == "tool.cancelled" {
			terminals++
		}
	}
	require.Equal(t, 1, terminals, "one tool terminal: %v", rec.Kinds())
	require.Equal(t, "run.cancelled", rec.Kinds()[len(rec.Kinds())-1])
}
