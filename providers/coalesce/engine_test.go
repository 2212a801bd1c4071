package coalesce_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/providers/coalesce"
)

// runOnce runs one single-turn run whose model answers with in, through
// the decorator when decorate is set, and returns its result, the kinds
// and payloads of its events other than the text deltas (their sequence
// numbers and times move up when deltas merge), and the text of the
// deltas.
func runOnce(t *testing.T, in []step, decorate bool) (res engine.Result, rest []string, deltas []string) {
	t.Helper()
	var p model.Provider = streams{next: func() model.Stream {
		return &readyStream{steps: append([]step(nil), in...)}
	}}
	if decorate {
		p = must(coalesce.New(coalesce.Config{Provider: p}))
	}
	rec := &enginetest.Recorder{}
	eng, err := engine.New(engine.Config{
		Provider: p,
		Plans:    must(enginetest.Plan("plan-1", enginetest.Echo())),
		IDs:      &id.Counter{Prefix: "w/"},
		Clock:    &enginetest.Clock{},
		Required: []eventlog.Observer{rec},
	})
	require.NoError(t, err)
	defer func() { require.NoError(t, eng.Close(context.Background())) }()
	def := must(engine.NewDefinition(engine.DefinitionConfig{Name: "w", Model: "m", MaxTurns: 1}))
	r, err := eng.Start(context.Background(), def, engine.Input{Message: must(message.User("hi"))})
	require.NoError(t, err)
	res, _ = r.Wait(context.Background())
	for _, e := range rec.Events() {
		if d, ok := e.Payload().(event.ModelTextDelta); ok {
			deltas = append(deltas, d.Text)
			continue
		}
		rest = append(rest, e.Kind()+" "+string(e.Payload().AppendJSON(nil)))
	}
	return res, rest, deltas
}

// The engine records the deltas that were ready as one model.text_delta;
// every other event, the answer and the usage are those of the same run
// without the decorator.
func TestS1_TheEngineRecordsReadyDeltasAsOneEvent(t *testing.T) {
	in := []step{ready(text("Hello")), ready(text(", ")), ready(text("world")), late(text("!")), ready(done)}
	plain, plainRest, plainDeltas := runOnce(t, in, false)
	merged, mergedRest, mergedDeltas := runOnce(t, in, true)
	require.Equal(t, []string{"Hello", ", ", "world", "!"}, plainDeltas)
	require.Equal(t, []string{"Hello, world", "!"}, mergedDeltas)
	require.Equal(t, plainRest, mergedRest)
	require.Equal(t, engine.Completed, merged.Status)
	require.Equal(t, "Hello, world!", merged.Final.Text())
	require.Equal(t, plain.Final, merged.Final)
	require.Equal(t, plain.Usage, merged.Usage)
}

// However the model's stream ends, the engine reports through the
// decorator exactly what it reports without it: the same events (the text
// deltas merged, their text the same), the same status and problem, and an
// observed model.failed for a stream that produced anything (K23).
func TestK23_TheEngineReportsTheSameOutcomeThroughTheDecorator(t *testing.T) {
	for name, in := range map[string][]step{
		"error after text":        {ready(text("a")), ready(text("b")), {err: errors.New("connection reset")}},
		"panic after text":        {ready(text("a")), ready(text("b")), readyPanic("boom")},
		"io.EOF after text":       {ready(text("a")), ready(text("b"))},
		"failed item after text":  {ready(text("a")), ready(text("b")), ready(enginetest.Fail("upstream", "the model failed"))},
		"text after the terminal": {ready(text("a")), ready(done), ready(text("b"))},
		"zero item after text":    {ready(text("a")), ready(text("b")), ready(model.Item{})},
		"tool call after text":    {ready(text("a")), ready(text("b")), ready(call), ready(done)},
		"text over the aggregate": {ready(text(strings.Repeat("a", 60<<10))), ready(text(strings.Repeat("b", 60<<10))),
			ready(text(strings.Repeat("c", 60<<10))), ready(text(strings.Repeat("d", 60<<10))), ready(text(strings.Repeat("e", 60<<10))), ready(done)},
	} {
		t.Run(name, func(t *testing.T) {
			plain, plainRest, plainDeltas := runOnce(t, in, false)
			merged, mergedRest, mergedDeltas := runOnce(t, in, true)
			require.Equal(t, plainRest, mergedRest)
			require.Equal(t, strings.Join(plainDeltas, ""), strings.Join(mergedDeltas, ""))
			require.Equal(t, plain.Status, merged.Status)
			require.Equal(t, plain.Problem, merged.Problem)
			require.Equal(t, plain.Final, merged.Final)
			if name != "tool call after text" {
				require.Equal(t, engine.Failed, merged.Status)
				require.Contains(t, mergedRest[len(mergedRest)-3], `model.failed `)
				require.Contains(t, mergedRest[len(mergedRest)-3], `"observed":true`)
			}
		})
	}
}
