package compose_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/providers/scripted"
	"github.com/spice-orch/spice-orch/store"
)

// sseEvent is one server-sent event of a Chat Completions stream.
func sseEvent(content, finish string) string {
	fr, delta := "null", `{}`
	if finish != "" {
		fr = `"` + finish + `"`
	}
	if content != "" {
		delta = `{"content":"` + content + `"}`
	}
	return `data: {"id":"chatcmpl-c","object":"chat.completion.chunk","model":"m",` +
		`"choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + fr + `}]}` + "\n\n"
}

// firstDelta passes every event to the store, and closes recorded once
// the store recorded a model.text_delta of role, relayed.
type firstDelta struct {
	eventlog.Observer
	role     string
	once     sync.Once
	recorded chan struct{}
}

func (d *firstDelta) Observe(ctx context.Context, e eventlog.Event) error {
	if err := d.Observer.Observe(ctx, e); err != nil {
		return err
	}
	if r, ok := e.Payload().(orchestrator.Relayed); ok && e.Kind() == event.KindModelTextDelta && r.Worker() == d.role {
		d.once.Do(func() { close(d.recorded) })
	}
	return nil
}

// An OpenAI-compatible worker whose chunks arrive together records them as
// one model.text_delta; a chunk the server sends only after the store
// recorded the first delta is a delta of its own. The store replays the
// pair timeline byte for byte as it was read live.
func TestS1_AWorkerRecordsTheChunksThatArriveTogetherAsOneDelta(t *testing.T) {
	ctx := context.Background()
	recorded := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		_, _ = io.WriteString(w, `data: {"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n"+
			sseEvent("Looks ", "")+sseEvent("good", "")+sseEvent(". ", ""))
		f.Flush()
		select {
		case <-recorded:
		case <-r.Context().Done():
			return
		}
		_, _ = io.WriteString(w, sseEvent(`\n`+scripted.DoneMarker, "")+sseEvent("", "stop")+"data: [DONE]\n\n")
		f.Flush()
	}))
	defer srv.Close()

	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	defer st.Close()
	obs := &firstDelta{Observer: st, role: scripted.ReviewerName, recorded: recorded}
	s := spec.Builtin()
	s.Workers[1] = spec.Worker{Role: scripted.ReviewerName, Provider: spec.OpenAI, Model: "m", MaxTurns: 2,
		OpenAI: spec.OpenAIOptions{BaseURL: srv.URL + "/v1", Timeout: time.Minute}}
	p, err := compose.Build(compose.Options{Spec: s, Workspace: t.TempDir(), PairID: "pair-c1", Store: obs,
		Getenv: func(string) string { return "" }})
	require.NoError(t, err)
	defer p.Close()

	pair, err := orchestrator.Start(ctx, p.Config)
	require.NoError(t, err)
	sub, err := pair.Subscribe(ctx, 0)
	require.NoError(t, err)
	var live []byte
	var reviewerDeltas []string
	for e, err := range sub.All(ctx) {
		require.NoError(t, err)
		live = append(e.AppendJSON(live), '\n')
		if r, ok := e.Payload().(orchestrator.Relayed); ok && r.Worker() == scripted.ReviewerName {
			if td, ok := r.Payload().(event.ModelTextDelta); ok {
				reviewerDeltas = append(reviewerDeltas, td.Text)
			}
		}
	}
	res, err := pair.Wait(ctx)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)

	require.Equal(t, []string{"Looks good. ", "\n" + scripted.DoneMarker}, reviewerDeltas)
	var replay bytes.Buffer
	require.NoError(t, st.ReplayJSON(ctx, &replay, "pair-c1"))
	require.Equal(t, string(live), replay.String())
}
