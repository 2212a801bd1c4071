package server

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/store"
)

// bodyType maps a request's Content-Type to the media type BuildRequest
// names, or "" for a type the API does not take. Requiring one of these
// also keeps a plain cross-site form from submitting: browsers send them
// only after a CORS preflight, which this server never approves.
func bodyType(header string) string {
	mt, _, err := mime.ParseMediaType(header)
	if err != nil {
		return ""
	}
	switch mt {
	case "application/json":
		return "application/json"
	case "application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml":
		return "application/yaml"
	}
	return ""
}

// createPair serves POST /v1/pairs.
func (s *Server) createPair(w http.ResponseWriter, r *http.Request) {
	ct := bodyType(r.Header.Get("Content-Type"))
	if ct == "" {
		fail(w, http.StatusUnsupportedMediaType, codeUnsupportedType, "the body must be a pair spec as application/json or application/yaml")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			fail(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "the body is over "+strconv.FormatInt(s.cfg.MaxBodyBytes, 10)+" bytes")
			return
		}
		fail(w, http.StatusBadRequest, codeBadRequest, "reading the body failed")
		return
	}
	task := r.URL.Query().Get("task")
	if task != "" && s.cfg.Queue != nil {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "task", Message: "task: not taken when workers play the pairs; put it in the spec"})
		return
	}
	if task != "" {
		if err := bound.Text("task", task, bound.MaxMessageBytes); err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "task", Message: err.Error()})
			return
		}
	}
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		fail(w, http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down")
		return
	}
	// A backend that knows its connection is down is not waited for, and
	// no workspace is made nor pair built for a submission it cannot take.
	if s.cfg.Queue != nil {
		if h, _ := s.backendHealth(); !h.Available {
			unavailable(w, h)
			return
		}
	}
	pairID, err := s.cfg.NewPairID()
	if err == nil {
		err = id.Check("pair.id", pairID)
	}
	if err != nil {
		fail(w, http.StatusInternalServerError, codeInternal, "naming the pair failed")
		return
	}
	ws := filepath.Join(s.cfg.DataDir, "workspaces", pairID)
	if err := os.MkdirAll(filepath.Dir(ws), 0o700); err != nil {
		fail(w, http.StatusInternalServerError, codeInternal, "making the pair's workspace failed")
		return
	}
	if err := os.Mkdir(ws, 0o700); err != nil {
		fail(w, http.StatusInternalServerError, codeInternal, "making the pair's workspace failed")
		return
	}
	f, err := newFeed(pairID, s.cfg.StreamLag)
	if err != nil {
		_ = os.Remove(ws)
		fail(w, http.StatusInternalServerError, codeInternal, "making the pair's feed failed")
		return
	}
	ctx := r.Context()
	if s.cfg.SubmitContext != nil {
		ctx = s.cfg.SubmitContext(ctx, r)
	}
	built, err := s.callBuild(ctx, BuildRequest{PairID: pairID, Workspace: ws, Body: body, ContentType: ct, Task: task, Timeline: f})
	if err != nil {
		_ = os.RemoveAll(ws)
		var re *RequestError
		if errors.As(err, &re) {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadSpec, Message: re.Message, Field: re.Field, Line: re.Line})
			return
		}
		fail(w, http.StatusInternalServerError, codeInternal, "building the pair failed")
		return
	}
	m := metaOf(built, task)
	if s.cfg.Queue != nil {
		s.enqueue(w, r, ws, built, pairID, body, m)
		return
	}
	if err := s.accept(pairID, journalEntry{ContentType: ct, Task: task, Body: body}); err != nil {
		s.discard(ws, built)
		fail(w, http.StatusInternalServerError, codeInternal, "recording the submission failed")
		return
	}
	s.writeMeta(pairID, m)
	e := &entry{id: pairID, submitted: s.cfg.Clock(), feed: f, ended: make(chan struct{})}
	// The entry and its waiter exist before the job can start, so a GET
	// right after the 201 finds the pair and nothing escapes the feed.
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		s.discard(ws, built)
		s.settle(pairID)
		fail(w, http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down")
		return
	}
	jobID, err := s.cfg.Scheduler.Submit(ctx, scheduler.Job{Pair: built.Config})
	if err != nil {
		s.mu.Unlock()
		s.discard(ws, built)
		s.settle(pairID)
		switch {
		case errors.Is(err, scheduler.ErrQueueFull):
			w.Header().Set("Retry-After", "1")
			fail(w, http.StatusTooManyRequests, codeQueueFull, "the queue is full; retry later")
		case errors.Is(err, scheduler.ErrClosed):
			fail(w, http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down")
		default:
			fail(w, http.StatusInternalServerError, codeInternal, "submitting the pair failed")
		}
		return
	}
	e.jobID = jobID
	s.pairs[pairID] = e
	s.wg.Add(1)
	s.mu.Unlock()
	go s.follow(e, built)

	v, _ := s.describe(r.Context(), pairID)
	w.Header().Set("Location", "/v1/pairs/"+pairID)
	writeJSON(w, http.StatusCreated, v)
}

// metaOf is what the page shows of a built pair beside its timeline
// (pairMeta), the host's redaction applied. The task is the one the pair
// works on: the spec's when no ?task= replaced it.
func metaOf(built Built, task string) pairMeta {
	m := pairMeta{Name: built.Name, Task: task, Unpinned: built.Unpinned, Spec: built.Spec}
	if c := built.Config; c != nil {
		if m.Task == "" {
			m.Task = c.Task
		}
		m.Systems = map[string]string{c.First.Role: c.First.Definition.System(), c.Second.Role: c.Second.Definition.System()}
	}
	m.redact(built.Redact)
	return m
}

// enqueue submits a built pair's spec to the queue. The build only
// checked the spec: a worker builds the pair again from the same bytes.
// The queue's acknowledgement makes the 201 durable, so no journal is
// written; m, what the page shows beside the timeline, is recorded once
// the queue has the job.
func (s *Server) enqueue(w http.ResponseWriter, r *http.Request, ws string, built Built, pairID string, body []byte, m pairMeta) {
	s.discard(ws, built)
	if _, err := s.cfg.Queue.Submit(r.Context(), job.Job{ID: pairID, Spec: body}); err != nil {
		if errors.Is(err, job.ErrUnavailable) {
			h, _ := s.backendHealth()
			unavailable(w, h)
			return
		}
		if errors.Is(err, bound.ErrExceeded) {
			// The body fit, the queue's message does not.
			fail(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "the spec is larger than the queue takes: "+err.Error())
			return
		}
		fail(w, http.StatusInternalServerError, codeInternal, "submitting the pair failed")
		return
	}
	s.writeMeta(pairID, m)
	v, err := s.describe(r.Context(), pairID)
	if err != nil {
		// The backend does not show the job yet: the view is of what was
		// submitted.
		v = pairView{ID: pairID, Name: m.Name, Task: m.Task, State: job.Queued.String(), Workers: []workerView{},
			UnpinnedTools: m.Unpinned, Spec: m.Spec, Links: linksOf(pairID)}
	}
	w.Header().Set("Location", "/v1/pairs/"+pairID)
	writeJSON(w, http.StatusCreated, v)
}

// callBuild calls the host's BuildFunc, containing a panic.
func (s *Server) callBuild(ctx context.Context, req BuildRequest) (b Built, err error) {
	defer func() {
		if recover() != nil {
			b, err = Built{}, errors.New("server: build panicked")
		}
	}()
	b, err = s.cfg.Build(ctx, req)
	if err == nil && (b.Config == nil || b.Config.ID != req.PairID) {
		if b.Close != nil {
			b.Close()
		}
		return Built{}, errors.New("server: build returned no config, or one with another pair ID")
	}
	return b, err
}

func (s *Server) discard(ws string, b Built) {
	if b.Close != nil {
		b.Close()
	}
	_ = os.RemoveAll(ws)
}

// getPair serves GET /v1/pairs/{id}.
func (s *Server) getPair(w http.ResponseWriter, r *http.Request) {
	v, err := s.describe(r.Context(), r.PathValue("id"))
	if err != nil {
		s.storeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}

// storeError answers a failed lookup.
func (s *Server) storeError(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrNotFound) {
		fail(w, http.StatusNotFound, codeNotFound, "no such pair")
		return
	}
	if errors.Is(err, job.ErrUnavailable) {
		h, _ := s.backendHealth()
		unavailable(w, h)
		return
	}
	fail(w, http.StatusInternalServerError, codeInternal, "reading the store failed")
}

// cancelPair serves POST /v1/pairs/{id}/cancel: 202 while the pair is
// queued or running, 409 once it has ended, while a cancel is already
// under way, or when another process plays it.
func (s *Server) cancelPair(w http.ResponseWriter, r *http.Request) {
	pairID := r.PathValue("id")
	e := s.lookup(pairID)
	if e == nil && s.cfg.Queue != nil {
		s.cancelQueued(w, r, pairID)
		return
	}
	if e == nil {
		v, err := s.describe(r.Context(), pairID)
		if err != nil {
			s.storeError(w, err)
			return
		}
		writeError(w, http.StatusConflict, apiError{Code: codeEnded, Message: "the pair is " + v.State + " and not run by this server"})
		return
	}
	info, err := s.info(e)
	if err == nil && !info.State.Terminal() {
		if !e.cancelling.CompareAndSwap(false, true) {
			writeError(w, http.StatusConflict, apiError{Code: codeCancelling, Message: "the pair is already being cancelled"})
			return
		}
		err = s.cfg.Scheduler.Cancel(e.jobID)
	}
	if err != nil && !errors.Is(err, scheduler.ErrNotFound) {
		fail(w, http.StatusInternalServerError, codeInternal, "cancelling failed")
		return
	}
	if err != nil || info.State.Terminal() {
		writeError(w, http.StatusConflict, apiError{Code: codeEnded, Message: "the pair has ended: " + stateOf(info, err)})
		return
	}
	v, _ := s.describe(r.Context(), pairID)
	writeJSON(w, http.StatusAccepted, v)
}

// cancelQueued cancels a pair that a worker plays, or will: 202 while
// it has not ended, 409 once it has.
func (s *Server) cancelQueued(w http.ResponseWriter, r *http.Request, pairID string) {
	st, err := s.cfg.Queue.Status(r.Context(), pairID)
	if err == nil && !st.State.Terminal() {
		err = s.cfg.Queue.Cancel(r.Context(), pairID)
	}
	switch {
	case errors.Is(err, job.ErrNotFound):
		fail(w, http.StatusNotFound, codeNotFound, "no such pair")
		return
	case errors.Is(err, job.ErrUnavailable):
		h, _ := s.backendHealth()
		unavailable(w, h)
		return
	case err != nil:
		fail(w, http.StatusInternalServerError, codeInternal, "cancelling failed")
		return
	case st.State.Terminal():
		writeError(w, http.StatusConflict, apiError{Code: codeEnded, Message: "the pair has ended: " + st.State.String()})
		return
	}
	v, err := s.describe(r.Context(), pairID)
	if err != nil {
		v = pairView{ID: pairID, State: st.State.String(), Workers: []workerView{}, Links: linksOf(pairID)}
	}
	writeJSON(w, http.StatusAccepted, v)
}

func stateOf(info scheduler.Info, err error) string {
	if err != nil {
		return "ended"
	}
	return info.State.String()
}

// examples serves GET /v1/examples.
func (s *Server) examples(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, struct {
		Examples []Example `json:"examples"`
	}{append([]Example{}, s.cfg.Examples...)})
}

// timePtr returns nil for the zero time, so JSON leaves it out.
func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
