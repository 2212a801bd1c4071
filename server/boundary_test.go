package server_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

// TestS2_AnUnlistedHostIsRefusedEvenWithTheToken: with a token and an
// explicit list of allowed hosts, a Host that is neither listed nor a
// loopback name is a 403, a valid token notwithstanding.
func TestS2_AnUnlistedHostIsRefusedEvenWithTheToken(t *testing.T) {
	h := newHarness(t, options{token: secret, mutate: func(c *server.Config) { c.Hosts = []string{"orch.example.com"} }})
	auth := []string{"Authorization", "Bearer " + secret}
	for host, status := range map[string]int{
		"attacker.example":      http.StatusForbidden,
		"attacker.example:7070": http.StatusForbidden,
		"10.0.0.8":              http.StatusForbidden,
		"orch.example.com":      http.StatusOK,
		"ORCH.example.com:7070": http.StatusOK,
		"localhost":             http.StatusOK,
		"[::1]:7070":            http.StatusOK,
	} {
		r := h.do("GET", "/v1/pairs", "", "", append(auth, "Host", host)...)
		require.Equal(t, status, r.status, "Host %s: %s", host, r.body)
		if status == http.StatusForbidden {
			require.Contains(t, string(r.body), `"code":"host_refused"`)
		}
	}
}

// TestS1_LastEventIDWinsOverAfter: a reconnecting EventSource sends
// Last-Event-ID with the URL it first opened, ?after= included: the stream
// resumes after Last-Event-ID.
func TestS1_LastEventIDWinsOverAfter(t *testing.T) {
	h := newHarness(t, options{})
	pairID := h.submit(relaySpec)
	h.wait(pairID)
	for _, c := range []struct{ lastID, after, first string }{{"5", "2", "6"}, {"2", "5", "3"}} {
		req, err := http.NewRequest("GET", h.url("/v1/pairs/"+pairID+"/events?after="+c.after), nil)
		require.NoError(t, err)
		req.Header.Set("Last-Event-ID", c.lastID)
		resp, err := h.http.Client().Do(req)
		require.NoError(t, err)
		evs, err := readSSE(t, resp.Body, nil)
		resp.Body.Close()
		require.NoError(t, err)
		require.NotEmpty(t, evs)
		require.Equal(t, c.first, evs[0].id, "Last-Event-ID %s, after %s", c.lastID, c.after)
	}
}

// TestS3_StreamsOverTheLimitAre503UntilOneCloses: with MaxStreams open,
// another stream is a 503 with Retry-After; once one closes, a new one is
// accepted.
func TestS3_StreamsOverTheLimitAre503UntilOneCloses(t *testing.T) {
	h := newHarness(t, options{mutate: func(c *server.Config) { c.MaxStreams = 2 }})
	released := make(chan struct{}, 4)
	h.srv.OnStreamReleased(func() {
		select {
		case released <- struct{}{}:
		default:
		}
	})
	pairID := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 2})
	<-h.holdOf(pairID).reached
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, closeFirst := context.WithCancel(ctx)
	a := h.openSSE(first, pairID, 0, false)
	b := h.openSSE(ctx, pairID, 0, false)
	defer b.Body.Close()
	for _, path := range []string{"/events", "/events.jsonl"} {
		r := h.do("GET", "/v1/pairs/"+pairID+path, "", "")
		require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.body))
		require.Equal(t, "1", r.header.Get("Retry-After"))
		require.Contains(t, string(r.body), `"code":"too_many_streams"`)
	}
	closeFirst()
	a.Body.Close()
	select {
	case <-released:
	case <-ctx.Done():
		t.Fatal("the closed stream kept its slot")
	}
	c := h.openSSE(ctx, pairID, 0, false)
	defer c.Body.Close()
	close(h.holdOf(pairID).release)
	evs, err := readSSE(t, c.Body, nil)
	require.NoError(t, err)
	require.Equal(t, "end", evs[len(evs)-1].event)
}
