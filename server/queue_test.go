package server_test

import (
	"context"
	"encoding/json"
	"iter"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
)

// memQueue stands for a job backend in another process (JetStream): it
// keeps what was submitted, queued, serves it as the server's History,
// and says whether its connection is up.
type memQueue struct {
	mu      sync.Mutex
	down    bool
	changed chan struct{}
	jobs    map[string]job.Job
	order   []string
	// listed, when set, is the history's pairs, newest submission first:
	// ListPairs gives as many of them as asked.
	listed []store.PairSummary
}

var (
	_ server.Queue   = (*memQueue)(nil)
	_ server.History = (*memQueue)(nil)
	_ job.Monitor    = (*memQueue)(nil)
)

func newMemQueue() *memQueue {
	return &memQueue{changed: make(chan struct{}), jobs: make(map[string]job.Job)}
}

func (q *memQueue) setDown(down bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.down = down
	close(q.changed)
	q.changed = make(chan struct{})
}

func (q *memQueue) Health() (job.Health, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return job.Health{Name: "NATS", State: "reconnecting"}, q.changed
	}
	return job.Health{Available: true, Name: "NATS", State: "connected"}, q.changed
}

func (q *memQueue) Submit(_ context.Context, j job.Job) (job.Status, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.down {
		return job.Status{}, job.ErrUnavailable
	}
	q.jobs[j.ID] = j
	q.order = append(q.order, j.ID)
	return job.Status{ID: j.ID, State: job.Queued}, nil
}

func (q *memQueue) Status(_ context.Context, id string) (job.Status, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.jobs[id]; !ok {
		return job.Status{}, job.ErrNotFound
	}
	return job.Status{ID: id, State: job.Queued}, nil
}

func (q *memQueue) Statuses(ctx context.Context, state job.State) iter.Seq2[job.Status, error] {
	q.mu.Lock()
	ids := append([]string(nil), q.order...)
	q.mu.Unlock()
	return func(yield func(job.Status, error) bool) {
		for _, id := range ids {
			if (state == 0 || state == job.Queued) && !yield(job.Status{ID: id, State: job.Queued}, nil) {
				return
			}
		}
	}
}

func (q *memQueue) Cancel(context.Context, string) error { return nil }

func (q *memQueue) Await(ctx context.Context, _ string) (job.Status, error) {
	<-ctx.Done()
	return job.Status{}, ctx.Err()
}

func (q *memQueue) Pair(_ context.Context, id string) (store.PairRecord, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if _, ok := q.jobs[id]; !ok {
		return store.PairRecord{}, store.ErrNotFound
	}
	return store.PairRecord{Summary: store.PairSummary{ID: id, Status: "queued"}}, nil
}

func (q *memQueue) ListPairs(_ context.Context, o store.ListOptions) ([]store.PairSummary, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.listed != nil {
		return q.listed[:min(len(q.listed), o.Limit)], nil
	}
	var out []store.PairSummary
	for i := len(q.order) - 1; i >= 0; i-- {
		out = append(out, store.PairSummary{ID: q.order[i], Status: "queued"})
	}
	return out, nil
}

// queueHarness is a harness whose server hands its pairs to q; builds
// counts the builds it asked for.
func queueHarness(t *testing.T, q *memQueue, builds *atomic.Int32, edit func(server.Built) server.Built) *harness {
	var h *harness
	h = newHarness(t, options{mutate: func(c *server.Config) {
		c.Scheduler, c.Queue, c.Store = nil, q, q
		c.Build = func(ctx context.Context, req server.BuildRequest) (server.Built, error) {
			builds.Add(1)
			b, err := h.build(ctx, req)
			if err == nil && edit != nil {
				b = edit(b)
			}
			return b, err
		}
	}})
	return h
}

// TestD4_ASubmissionWhileTheBackendIsDownBuildsNothing: while the
// backend's connection is down a submission is a 503 at once, before
// any workspace is made or the pair built; once it is back the same
// submission is taken.
func TestD4_ASubmissionWhileTheBackendIsDownBuildsNothing(t *testing.T) {
	q := newMemQueue()
	var builds atomic.Int32
	h := queueHarness(t, q, &builds, nil)
	q.setDown(true)
	body := `{"first":["a"],"second":["b"]}`
	r := h.do("POST", "/v1/pairs", "application/json", body)
	require.Equal(t, http.StatusServiceUnavailable, r.status, string(r.body))
	require.Contains(t, string(r.body), `"code":"backend_unavailable"`)
	require.Equal(t, "2", r.header.Get("Retry-After"))
	require.Zero(t, builds.Load(), "nothing was built")
	des, err := os.ReadDir(filepath.Join(h.data, "workspaces"))
	if err == nil {
		require.Empty(t, des, "no workspace was made")
	} else {
		require.ErrorIs(t, err, os.ErrNotExist)
	}

	q.setDown(false)
	r = h.do("POST", "/v1/pairs", "application/json", body)
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	require.Equal(t, int32(1), builds.Load())
}

// TestS2_AQueuedPairShowsItsNameTaskAndSpec: a pair handed to a worker
// is shown, at once and in GET /v1/pairs/ID, with the name, task, spec
// and unpinned tools its build gave, the host's redaction applied, as a
// pair this server plays itself.
func TestS2_AQueuedPairShowsItsNameTaskAndSpec(t *testing.T) {
	const secret = "s3cr3t-value"
	q := newMemQueue()
	var builds atomic.Int32
	h := queueHarness(t, q, &builds, func(b server.Built) server.Built {
		b.Name = "queued " + secret
		b.Unpinned = []string{"remote.search"}
		b.Spec = json.RawMessage(`{"version":1,"system":"use ` + secret + `"}`)
		b.Redact = func(s string) string { return strings.ReplaceAll(s, secret, "[redacted]") }
		return b
	})
	r := h.do("POST", "/v1/pairs", "application/json", `{"first":["a"],"second":["b"]}`)
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal(r.body, &created))
	for _, body := range []string{string(r.body), string(h.do("GET", "/v1/pairs/"+created.ID, "", "").body)} {
		require.NotContains(t, body, secret)
		var v struct {
			Name          string
			Task          string
			State         string
			UnpinnedTools []string `json:"unpinned_tools"`
			Spec          json.RawMessage
		}
		require.NoError(t, json.Unmarshal([]byte(body), &v), body)
		require.Equal(t, "queued [redacted]", v.Name)
		require.Equal(t, "test task", v.Task)
		require.Equal(t, "queued", v.State)
		require.Equal(t, []string{"remote.search"}, v.UnpinnedTools)
		require.JSONEq(t, `{"version":1,"system":"use [redacted]"}`, string(v.Spec))
	}
}

// TestS2_PairsOnAQueueListByWhenTheyWereSubmitted: a backend whose pairs
// start long after they are submitted (queued, or taken again after a
// worker died) lists them newest submission first; the server keeps that
// order, so a queued pair is on top and paging shows every pair once.
func TestS2_PairsOnAQueueListByWhenTheyWereSubmitted(t *testing.T) {
	q := newMemQueue()
	t0 := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	q.listed = []store.PairSummary{
		{ID: "pair-d", Status: "queued", Submitted: at(4)},
		{ID: "pair-c", Status: store.StatusRunning, Submitted: at(3), Started: at(3)},
		{ID: "pair-b", Status: store.StatusCompleted, Submitted: at(2), Started: at(2), Ended: at(5)},
		{ID: "pair-a", Status: store.StatusCompleted, Submitted: at(1), Started: at(40), Ended: at(41)},
	}
	var builds atomic.Int32
	h := queueHarness(t, q, &builds, nil)
	want := []string{"pair-d", "pair-c", "pair-b", "pair-a"}
	got := h.pageIDs(t, 1)
	require.Equal(t, want, got)
}
