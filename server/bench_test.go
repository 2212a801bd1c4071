package server_test

import (
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spice-orch/spice-orch/server"
)

// BenchmarkServeSSEFanout: one finished pair's timeline of about 200
// events, served from the feed to 100 SSE subscribers at once over real
// loopback HTTP; events/s counts the events all subscribers received.
func BenchmarkServeSSEFanout(b *testing.B) {
	h := newHarness(b, benchOptions)
	pairID := h.submit(testSpec{First: []string{strings.Repeat("word ", 400)}, Second: []string{"ok"}, Deltas: 190})
	h.wait(pairID)
	const subscribers = 100
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: subscribers}}
	defer client.CloseIdleConnections()
	url := h.url("/v1/pairs/" + pairID + "/events")
	var events int64
	start := time.Now()
	for b.Loop() {
		var wg sync.WaitGroup
		counts := make([]int64, subscribers)
		for i := range subscribers {
			wg.Go(func() {
				resp, err := client.Get(url)
				if err != nil {
					return
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				counts[i] = int64(strings.Count(string(body), "\nid: ") + 1)
			})
		}
		wg.Wait()
		for _, c := range counts {
			events += c - 1 // the first "id:" follows "retry:"; the end frame has none
		}
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")
}

// BenchmarkServePairs: pairs per second through POST /v1/pairs, each a
// relay of two scripted workers recorded in the store, until every
// submitted pair has ended.
func BenchmarkServePairs(b *testing.B) {
	h := newHarness(b, benchOptions)
	body := `{"first":["draft"],"second":["ok"]}`
	client := h.http.Client()
	var ids []string
	start := time.Now()
	for b.Loop() {
		req, _ := http.NewRequest("POST", h.url("/v1/pairs"), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusTooManyRequests {
			continue
		}
		if resp.StatusCode != http.StatusCreated {
			b.Fatal(resp.Status)
		}
		ids = append(ids, strings.TrimPrefix(resp.Header.Get("Location"), "/v1/pairs/"))
	}
	for _, id := range ids {
		h.waitEnded(id)
	}
	b.ReportMetric(float64(len(ids))/time.Since(start).Seconds(), "pairs/s")
}

var benchOptions = options{pairs: 8, queue: 1 << 16, mutate: func(c *server.Config) { c.MaxStreams = 256 }}
