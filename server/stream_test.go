package server_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

var reviewSpec = testSpec{Pattern: "review", Deltas: 3,
	First:  []string{"first draft", "second draft"},
	Second: []string{"needs work", "fine\nAPPROVED"}}

// TestS1_SSEResumeAtEveryCursorOfAFinishedPair: from every cursor, by
// ?after= and by Last-Event-ID, the stream delivers exactly the events
// after it, byte for byte the JSON lines of the store, then "end"; past
// the end it says out_of_range with the recovery cursor. It holds from
// the server's memory and, after a restart, from the store alone.
func TestS1_SSEResumeAtEveryCursorOfAFinishedPair(t *testing.T) {
	dir := t.TempDir()
	h := newHarness(t, options{storePath: dir + "/runs.db"})
	pairID := h.submit(reviewSpec)
	jl := h.wait(pairID)
	want, _ := jsonLines(t, replay(t, h.st, pairID))
	got, _ := jsonLines(t, jl)
	require.Equal(t, want, got, "events.jsonl is the recorded timeline byte for byte")
	check := func(h *harness) {
		n := uint64(len(want))
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for c := uint64(0); c <= n+1; c++ {
			for _, byHeader := range []bool{false, true} {
				resp := h.openSSE(ctx, pairID, c, byHeader)
				evs, err := readSSE(t, resp.Body, nil)
				resp.Body.Close()
				if c <= n {
					require.NoError(t, err)
				}
				require.NotEmpty(t, evs)
				last := evs[len(evs)-1]
				if c > n {
					require.Equal(t, "out_of_range", last.event)
					require.Equal(t, `{"last_delivered":`+strconv.FormatUint(c, 10)+`,"recovery":`+strconv.FormatUint(n, 10)+`}`, last.data)
					continue
				}
				require.Equal(t, "end", last.event)
				require.Equal(t, `{"state":"completed","last_seq":`+strconv.FormatUint(n, 10)+`}`, last.data)
				require.Equal(t, want[c:], frames(t, evs[:len(evs)-1], c+1), "cursor %d", c)
			}
			r := h.do("GET", "/v1/pairs/"+pairID+"/events.jsonl?after="+strconv.FormatUint(c, 10), "", "")
			if c > n {
				require.Equal(t, http.StatusRequestedRangeNotSatisfiable, r.status)
				continue
			}
			lines, _ := jsonLines(t, r.body)
			require.Equal(t, want[c:], lines)
		}
	}
	check(h)
	// A new server over the same store: the pair streams from the store.
	h.close()
	h2 := newHarness(t, options{storePath: dir + "/runs.db"})
	check(h2)
}

// TestS1_SSEResumeAtEveryCursorOfALivePair: while the pair is held after
// event k, a stream opened at every cursor up to k gets exactly the
// events after it; once released, every one of them goes on to the
// terminal without a gap or a duplicate.
func TestS1_SSEResumeAtEveryCursorOfALivePair(t *testing.T) {
	h := newHarness(t, options{})
	const k = 12
	sp := reviewSpec
	sp.Hold = k
	pairID := h.submit(sp)
	hd := h.holdOf(pairID)
	<-hd.reached
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	type stream struct {
		after uint64
		body  io.ReadCloser
		br    *bufio.Reader
		got   []sseEvent
	}
	var streams []*stream
	for c := uint64(0); c <= k; c++ {
		resp := h.openSSE(ctx, pairID, c, c%2 == 1)
		st := &stream{after: c, body: resp.Body, br: bufio.NewReader(resp.Body)}
		if c < k {
			evs, err := readSSE(t, st.br, func(e sseEvent) bool { return e.id == strconv.Itoa(k) })
			require.NoError(t, err)
			st.got = evs
		}
		streams = append(streams, st)
	}
	close(hd.release)
	want, _ := jsonLines(t, h.wait(pairID))
	var wg sync.WaitGroup
	for _, st := range streams {
		wg.Go(func() {
			defer st.body.Close()
			evs, err := readSSE(t, st.br, nil)
			if err != nil {
				return
			}
			st.got = append(st.got, evs...)
		})
	}
	wg.Wait()
	for _, st := range streams {
		require.NotEmpty(t, st.got, "cursor %d", st.after)
		last := st.got[len(st.got)-1]
		require.Equal(t, "end", last.event, "cursor %d", st.after)
		require.Equal(t, want[st.after:], frames(t, st.got[:len(st.got)-1], st.after+1), "cursor %d", st.after)
	}
	// A cursor past the last durable event of a live pair is out of range.
	sp.Hold = 2
	live := h.submit(sp)
	<-h.holdOf(live).reached
	resp := h.openSSE(ctx, live, 5, false)
	evs, err := readSSE(t, resp.Body, func(e sseEvent) bool { return e.event == "out_of_range" })
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, `{"last_delivered":5,"recovery":2}`, evs[len(evs)-1].data)
	close(h.holdOf(live).release)
	h.wait(live)
}

// TestS3_ManyClientsOnManyPairsGetIdenticalStreams: 200 SSE clients on 50
// pairs; every client of a pair gets the same gap-free stream, the one the
// store recorded.
func TestS3_ManyClientsOnManyPairsGetIdenticalStreams(t *testing.T) {
	h := newHarness(t, options{pairs: 50, mutate: func(c *server.Config) { c.MaxStreams = 256 }})
	const pairs, perPair = 50, 4
	ids := make([]string, pairs)
	for i := range ids {
		ids[i] = h.submit(testSpec{First: []string{"draft " + strconv.Itoa(i)}, Second: []string{"ok"}})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := make([][]string, pairs*perPair)
	var wg sync.WaitGroup
	for i := range got {
		wg.Go(func() {
			resp := h.openSSE(ctx, ids[i/perPair], 0, false)
			defer resp.Body.Close()
			evs, err := readSSE(t, resp.Body, nil)
			if err != nil || len(evs) == 0 || evs[len(evs)-1].event != "end" {
				return
			}
			got[i] = frames(t, evs[:len(evs)-1], 1)
		})
	}
	wg.Wait()
	for p, pairID := range ids {
		want, _ := jsonLines(t, replay(t, h.st, pairID))
		for c := range perPair {
			require.Equal(t, want, got[p*perPair+c], "pair %d, client %d", p, c)
		}
	}
}

// TestS3_SlowClientIsDisconnectedWithoutSlowingThePair: a client that
// stops reading is never waited for: the pair runs to its end while the
// client's socket is full, and the client is then disconnected without
// the end event; it resumes from its last id without a gap.
func TestS3_SlowClientIsDisconnectedWithoutSlowingThePair(t *testing.T) {
	h := newHarness(t, options{lag: 8, smallBuffers: true, mutate: func(c *server.Config) { c.WriteTimeout = time.Minute }})
	long := strings.Repeat("many words of a long answer ", 600)
	sp := testSpec{Pattern: "relay", First: []string{long}, Second: []string{long}, Deltas: 200, Hold: 1}
	pairID := h.submit(sp)
	<-h.holdOf(pairID).reached

	conn, err := net.Dial("tcp", strings.TrimPrefix(h.http.URL, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.(*net.TCPConn).SetReadBuffer(4096))
	req, err := http.NewRequest("GET", h.url("/v1/pairs/"+pairID+"/events"), nil)
	require.NoError(t, err)
	require.NoError(t, req.Write(conn))
	br := bufio.NewReaderSize(conn, 4096)
	sresp, err := http.ReadResponse(br, req)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, sresp.StatusCode)

	// The client reads nothing more while the pair plays to its end.
	close(h.holdOf(pairID).release)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h.wait(pairID) // fails if the pair waited for the slow client
	// Now read: the stream ends early, without "end".
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(time.Minute)))
	rest, _ := io.ReadAll(sresp.Body)
	require.NotContains(t, string(rest), "event: end")
	lastID := uint64(0)
	for _, l := range strings.Split(string(rest), "\n") {
		if v, ok := strings.CutPrefix(l, "id: "); ok {
			n, err := strconv.ParseUint(v, 10, 64)
			require.NoError(t, err)
			require.Equal(t, lastID+1, n, "no gap before the disconnect")
			lastID = n
		}
	}
	want, _ := jsonLines(t, replay(t, h.st, pairID))
	require.Less(t, lastID, uint64(len(want)))
	// It resumes where it was cut off.
	resp := h.openSSE(ctx, pairID, lastID, true)
	defer resp.Body.Close()
	evs, err := readSSE(t, resp.Body, nil)
	require.NoError(t, err)
	require.Equal(t, want[lastID:], frames(t, evs[:len(evs)-1], lastID+1))
}

// A stream that waits gets heartbeat comments.
func TestServeHeartbeats(t *testing.T) {
	h := newHarness(t, options{mutate: func(c *server.Config) { c.Heartbeat = time.Millisecond }})
	sp := relaySpec
	sp.Hold = 1
	pairID := h.submit(sp)
	<-h.holdOf(pairID).reached
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp := h.openSSE(ctx, pairID, 1, false)
	br := bufio.NewReader(resp.Body)
	for {
		l, err := br.ReadString('\n')
		require.NoError(t, err)
		if l == ": heartbeat\n" {
			break
		}
	}
	resp.Body.Close()
	close(h.holdOf(pairID).release)
	h.wait(pairID)
}
