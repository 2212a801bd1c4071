package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// oneTerminal checks a recorded timeline: sequences 1..N and exactly one
// pair terminal, last; it returns the terminal's kind.
func oneTerminal(t *testing.T, jsonl []byte) string {
	t.Helper()
	lines, seqs := jsonLines(t, jsonl)
	require.NotEmpty(t, lines)
	terminals := 0
	var last string
	for i, l := range lines {
		require.Equal(t, uint64(i+1), seqs[i])
		var v struct{ Kind string }
		require.NoError(t, json.Unmarshal([]byte(l), &v))
		if orchestrator.Terminal(v.Kind) {
			terminals++
		}
		last = v.Kind
	}
	require.Equal(t, 1, terminals, "exactly one terminal")
	require.True(t, orchestrator.Terminal(last), "the terminal is last")
	return last
}

// TestS1_ACancelledQueuedPairEndsWithPairCancelled: a pair cancelled while
// it waits for a slot is recorded — pair.started, pair.cancelled — and its
// stream ends with that terminal, then end.
func TestS1_ACancelledQueuedPairEndsWithPairCancelled(t *testing.T) {
	h := newHarness(t, options{pairs: 1, queue: 4})
	running := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 1})
	<-h.holdOf(running).reached
	queued := h.submit(relaySpec)
	r := h.do("GET", "/v1/pairs/"+queued, "", "")
	require.Contains(t, string(r.body), `"state":"queued"`)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := h.openSSE(ctx, queued, 0, false)
	defer resp.Body.Close()
	r = h.do("POST", "/v1/pairs/"+queued+"/cancel", "", "")
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	evs, err := readSSE(t, resp.Body, nil)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(evs), 3)
	data := frames(t, evs[:len(evs)-1], 1)
	require.Contains(t, data[0], `"kind":"pair.started"`)
	require.Contains(t, data[len(data)-1], `"kind":"pair.cancelled"`)
	require.Equal(t, "end", evs[len(evs)-1].event)
	require.Contains(t, evs[len(evs)-1].data, `"state":"cancelled"`)

	require.Equal(t, "pair.cancelled", oneTerminal(t, replay(t, h.st, queued)))
	rec, err := h.st.Pair(context.Background(), queued)
	require.NoError(t, err)
	require.Equal(t, "cancelled", string(rec.Summary.Status))
	require.Empty(t, rec.Runs, "no run started")
	close(h.holdOf(running).release)
	h.wait(running)
}

// TestS1_ShutdownRecordsEveryAcceptedPair: when the host shuts the
// scheduler down and closes the server, every pair it accepted — running
// or queued — is in the store with exactly one terminal, the queued ones
// pair.cancelled.
func TestS1_ShutdownRecordsEveryAcceptedPair(t *testing.T) {
	h := newHarness(t, options{pairs: 1, queue: 16})
	running := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 1})
	<-h.holdOf(running).reached
	var queued []string
	for range 8 {
		queued = append(queued, h.submit(relaySpec))
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- h.sched.Shutdown(ctx) }()
	close(h.holdOf(running).release)
	require.NoError(t, h.srv.Close(ctx))
	require.NoError(t, <-shut)

	oneTerminal(t, replay(t, h.st, running))
	for _, id := range queued {
		require.Equal(t, "pair.cancelled", oneTerminal(t, replay(t, h.st, id)), id)
		rec, err := h.st.Pair(context.Background(), id)
		require.NoError(t, err, id)
		require.Equal(t, "cancelled", string(rec.Summary.Status))
	}
	listed, err := h.st.ListPairs(context.Background(), storeList(20))
	require.NoError(t, err)
	var ids []string
	for _, p := range listed {
		ids = append(ids, p.ID)
	}
	for _, id := range append(queued, running) {
		require.Contains(t, strings.Join(ids, " "), id)
	}
}

func storeList(n int) store.ListOptions { return store.ListOptions{Limit: n} }
