package server_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
)

// TestS1_APairAnotherProcessRecordsIsFollowedFromTheStore: a pair that
// another open of the same store plays (as another process would) is shown
// as running without a cancel the server cannot carry out, and its stream
// follows the store to the terminal, then ends.
func TestS1_APairAnotherProcessRecordsIsFollowedFromTheStore(t *testing.T) {
	followForeign(t, nil)
}

// partsHistory is the store read by parts, as the JetStream backend reads
// a pair: each call of a reader returns only the events after those it
// returned before. It counts the events its readers return.
type partsHistory struct {
	*store.Store
	readers, events atomic.Int64
}

var _ server.PairReaders = (*partsHistory)(nil)

func (h *partsHistory) PairReader(pairID string) func(context.Context) (store.PairRecord, error) {
	h.readers.Add(1)
	var last uint64
	return func(ctx context.Context) (store.PairRecord, error) {
		rec, err := h.Pair(ctx, pairID)
		if err != nil {
			return rec, err
		}
		var fresh []store.Entry
		for _, en := range rec.Events {
			if en.Event.Seq() > last {
				fresh = append(fresh, en)
			}
		}
		if n := len(fresh); n > 0 {
			last = fresh[n-1].Event.Seq()
		}
		rec.Events = fresh
		h.events.Add(int64(len(fresh)))
		return rec, nil
	}
}

// TestS3_AStreamReadsAFollowedPairByParts: a store that reads a pair by
// parts is read for what is new at each poll: a stream following a pair
// another process plays reads each event once, and writes the same bytes
// as from a store read whole.
func TestS3_AStreamReadsAFollowedPairByParts(t *testing.T) {
	var h *partsHistory
	n := followForeign(t, func(st *store.Store) server.History {
		h = &partsHistory{Store: st}
		return h
	})
	require.Equal(t, int64(1), h.readers.Load())
	require.Equal(t, int64(n), h.events.Load(), "events read while following the pair")
}

// followForeign plays a pair through another open of the server's store,
// follows it with a stream from the start while it runs, checks what the
// stream writes, and returns the pair's event count. wrap, if not nil,
// makes the server's History of its store.
func followForeign(t *testing.T, wrap func(*store.Store) server.History) int {
	dir := t.TempDir()
	path := dir + "/runs.db"
	h := newHarness(t, options{storePath: path, mutate: func(c *server.Config) {
		c.StorePoll = 10 * time.Millisecond
		if wrap != nil {
			c.Store = wrap(c.Store.(*store.Store))
		}
	}})
	other, err := store.Open(context.Background(), path)
	require.NoError(t, err)
	defer other.Close()

	const pairID = "pair-20260101-000000-0000abcd"
	built, err := h.build(context.Background(), server.BuildRequest{PairID: pairID,
		Body: []byte(`{"first":["a","b"],"second":["c"],"deltas":4,"hold":3}`), Timeline: eventlog.ObserverFunc(
			func(context.Context, eventlog.Event) error { return nil })})
	require.NoError(t, err)
	cfg := *built.Config
	cfg.Timeline.Required = append([]eventlog.Observer{other}, cfg.Timeline.Required[1:]...)
	cfg.First.Engine.Required = []eventlog.Observer{other}
	cfg.Second.Engine.Required = []eventlog.Observer{other}
	p, err := orchestrator.Start(context.Background(), cfg)
	require.NoError(t, err)
	hd := h.holdOf(pairID)
	<-hd.reached

	r := h.do("GET", "/v1/pairs/"+pairID, "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"state":"running"`)
	require.Contains(t, string(r.body), `"cancellable":false`)
	r = h.do("POST", "/v1/pairs/"+pairID+"/cancel", "", "")
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, string(r.body), "not run by this server")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := h.openSSE(ctx, pairID, 0, false)
	defer resp.Body.Close()
	first, err := readSSE(t, resp.Body, func(e sseEvent) bool { return e.id == "3" })
	require.NoError(t, err)
	require.Len(t, frames(t, first, 1), 3, "the stream waits for what the store records next")
	close(hd.release)
	_, err = p.Wait(ctx)
	require.NoError(t, err)
	rest, err := readSSE(t, resp.Body, nil)
	require.NoError(t, err)
	require.Equal(t, "end", rest[len(rest)-1].event)
	require.Contains(t, rest[len(rest)-1].data, `"state":"completed"`)
	got := append(frames(t, first, 1), frames(t, rest[:len(rest)-1], 4)...)
	want := strings.TrimSuffix(string(replay(t, other, pairID)), "\n")
	require.Equal(t, want, strings.Join(got, "\n"))
	return len(got)
}

// TestS1_ASecondCancelWhileCancellingSaysSo: a cancel while the first is
// under way is a 409 saying so, and the pair is no longer offered for
// cancelling.
func TestS1_ASecondCancelWhileCancellingSaysSo(t *testing.T) {
	h := newHarness(t, options{})
	pairID := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 2})
	hd := h.holdOf(pairID)
	<-hd.reached
	r := h.do("GET", "/v1/pairs/"+pairID, "", "")
	require.Contains(t, string(r.body), `"cancellable":true`)
	r = h.do("POST", "/v1/pairs/"+pairID+"/cancel", "", "")
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	require.Contains(t, string(r.body), `"cancellable":false`)
	r = h.do("POST", "/v1/pairs/"+pairID+"/cancel", "", "")
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, string(r.body), `"code":"already_cancelling"`)
	close(hd.release)
	lines, _ := jsonLines(t, h.wait(pairID))
	require.Contains(t, lines[len(lines)-1], `"kind":"pair.cancelled"`)
}
