package engine_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// replayScript is a tool run whose first answer text is given.
func replayScript(text string) [][]model.Item {
	return [][]model.Item{
		{enginetest.Text(text), enginetest.Call("call-1", "echo", `{"q":"weather"}`), enginetest.Done(11, 4)},
		{enginetest.Text("It is "), enginetest.Text("sunny."), enginetest.Done(23, 6)},
	}
}

// replay runs replayScript(text) on a fresh engine (fresh id.Counter and
// enginetest.Clock) and returns the encoded events, as read by a
// subscriber and as told to the required observer.
func replay(t *testing.T, text string) (subscribed, observed []byte) {
	t.Helper()
	f := newFixture(t, fixtureConfig{tools: []tool.Tool{enginetest.Echo()}, script: replayScript(text)})
	r, _, err := f.run(t, 4)
	require.NoError(t, err)
	evs := events(t, r)
	requireWellFormed(t, evs)
	require.NoError(t, f.eng.Close(context.Background()))
	return encodeAll(evs), encodeAll(f.rec.Events())
}

func TestK30_ReplayIsByteIdentical(t *testing.T) {
	first, firstObserved := replay(t, "Let me look.")
	require.Equal(t, first, firstObserved, "observers and subscribers see the same bytes")
	for range 3 {
		again, _ := replay(t, "Let me look.")
		require.True(t, bytes.Equal(first, again), "replay differs:\n%s\n%s", first, again)
	}

	// Every event decodes strictly and re-encodes to the same bytes.
	var reencoded []byte
	rest := first
	for len(rest) > 0 {
		n := bytes.Index(rest, []byte(`}{"seq":`)) + 1
		if n == 0 {
			n = len(rest)
		}
		e, _, err := event.Decode(rest[:n])
		require.NoError(t, err)
		reencoded = e.AppendJSON(reencoded)
		rest = rest[n:]
	}
	require.Equal(t, first, reencoded)

	// The bytes depend on the script: one changed text changes them.
	changed, _ := replay(t, "Let me see.")
	require.False(t, bytes.Equal(first, changed))
	require.Equal(t, len(first)-1, len(changed), "only the one text differs")
}

// TestK30_ReplayIndependentOfObservers: observers and the caller's
// goroutine choice (Start or Run) do not change the bytes.
func TestK30_ReplayIndependentOfObservers(t *testing.T) {
	want, _ := replay(t, "Let me look.")
	f := newFixture(t, fixtureConfig{tools: []tool.Tool{enginetest.Echo()}, script: replayScript("Let me look."),
		mutate: func(c *engine.Config) {
			c.Required = nil
			c.BestEffort = []eventlog.Observer{&enginetest.Recorder{}}
		}})
	r, err := f.eng.Run(context.Background(), definition(t, 4), engine.Input{Message: user(t, "hello")})
	require.NoError(t, err)
	_, err = waitRun(r)
	require.NoError(t, err)
	require.Equal(t, want, encodeAll(events(t, r)))
	require.NoError(t, f.eng.Close(context.Background()))
}
