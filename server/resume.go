package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/store"
)

// A pair this server accepted keeps its journal file until its terminal
// is in the store, so a pair that a stopped server left interrupted can be
// built again from what the client sent, and continued from its record by
// orchestrator.Resume: at start-up (ResumeWaiting) for a pair that was
// waiting for an approval, or on request (POST /v1/pairs/{id}/resume).

// Error codes of the resume route besides the orchestrator's refusal
// reasons (orchestrator.ResumeError.Reason), which are codes as they are.
const (
	codeNotInterrupted = orchestrator.ReasonNotInterrupted
	codeClaimed        = "pair_claimed"
	codeNotResumable   = "not_resumable"
)

// maxResumeBody bounds the body of a resume request: a list of call IDs.
const maxResumeBody = 64 << 10

// resumeBody is the body of POST /v1/pairs/{id}/resume.
type resumeBody struct {
	// AcceptUncertain lists uncertain calls a person checked and accepts
	// as failed: they are never run again.
	AcceptUncertain []string `json:"accept_uncertain"`
}

// resumeError is why a pair was not resumed, with the status to answer.
type resumeError struct {
	status int
	apiError
	Call string `json:"call,omitempty"`
	Err  error  `json:"-"`
}

func (e *resumeError) Error() string { return "server: resume: " + e.Code + ": " + e.Message }
func (e *resumeError) Unwrap() error { return e.Err }

// resumeStore is what a resume needs of the history beyond reading it:
// the interrupted runs' own logs and a claim on the pair. The SQLite store
// has both; a queue's history has neither, since its workers resume the
// pairs they were handed again.
type resumeStore interface {
	Run(ctx context.Context, runID string) (store.RunRecord, error)
	ClaimPair(ctx context.Context, pairID string) error
}

var _ resumeStore = (*store.Store)(nil)

// errNotHere refuses a resume on a server whose pairs workers play.
var errNotHere = &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeNotResumable,
	Message: "this server's pairs are played by workers, which resume a pair delivered to them again"}}

// resumeStore returns the history as a resumeStore when this server plays
// its pairs itself.
func (s *Server) resumeStore() (resumeStore, bool) {
	if s.cfg.Scheduler == nil {
		return nil, false
	}
	rs, ok := s.cfg.Store.(resumeStore)
	return rs, ok
}

// resumable reports whether this server holds what resuming pairID
// needs besides its record: it plays its pairs itself, the store can be
// claimed, and the pair's journal file and workspace are here.
func (s *Server) resumable(pairID string) bool {
	if _, ok := s.resumeStore(); !ok {
		return false
	}
	if fi, err := os.Stat(s.journalPath(pairID)); err != nil || !fi.Mode().IsRegular() {
		return false
	}
	fi, err := os.Stat(filepath.Join(s.cfg.DataDir, "workspaces", pairID))
	return err == nil && fi.IsDir()
}

// resumePair serves POST /v1/pairs/{id}/resume.
func (s *Server) resumePair(w http.ResponseWriter, r *http.Request) {
	var accept []id.Call
	if r.ContentLength != 0 {
		if bodyType(r.Header.Get("Content-Type")) != "application/json" {
			fail(w, http.StatusUnsupportedMediaType, codeUnsupportedType, `the body must be application/json: {"accept_uncertain":["CALL_ID"]}`)
			return
		}
		raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxResumeBody))
		if err != nil {
			fail(w, http.StatusRequestEntityTooLarge, codeBodyTooLarge, "a resume request is at most 65536 bytes")
			return
		}
		if accept, err = decodeResume(raw); err != nil {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "accept_uncertain", Message: err.Error()})
			return
		}
	}
	pairID := r.PathValue("id")
	if err := s.resume(r.Context(), pairID, accept); err != nil {
		var re *resumeError
		if !errors.As(err, &re) {
			fail(w, http.StatusInternalServerError, codeInternal, "resuming the pair failed")
			return
		}
		writeJSON(w, re.status, struct {
			Error *resumeError `json:"error"`
		}{re})
		return
	}
	v, _ := s.describe(r.Context(), pairID)
	writeJSON(w, http.StatusAccepted, v)
}

// decodeResume reads a resume body strictly.
func decodeResume(raw []byte) ([]id.Call, error) {
	var b resumeBody
	d := json.NewDecoder(bytes.NewReader(raw))
	d.DisallowUnknownFields()
	if err := d.Decode(&b); err != nil {
		return nil, errors.New(`the body must be {"accept_uncertain":["CALL_ID"]}`)
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the resume object")
	}
	if len(b.AcceptUncertain) > orchestrator.MaxAccepted {
		return nil, errors.New("too many calls")
	}
	out := make([]id.Call, 0, len(b.AcceptUncertain))
	for _, c := range b.AcceptUncertain {
		call, err := id.Parse[id.Call]("accept_uncertain[]", c)
		if err != nil {
			return nil, errors.New("accept_uncertain: not a call ID")
		}
		out = append(out, call)
	}
	return out, nil
}

// ResumeWaiting resumes the pairs that an earlier server on this data
// directory and store left interrupted while a question waited for its
// answer: each is built again from its journal file and continued from
// its record, so the same question is asked again (the same call and
// digest) and listed by GET /v1/pairs/{id}/approvals. Call it after
// Recover, before serving; it returns how many pairs it resumed.
func (s *Server) ResumeWaiting(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(s.journalDir())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, de := range ents {
		pairID, ok := cutJSON(de)
		if !ok {
			continue
		}
		rec, err := s.cfg.Store.Pair(ctx, pairID)
		if err != nil || rec.Summary.Status != store.StatusInterrupted {
			continue
		}
		rj, err := s.readRecord(ctx, rec)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !rj.waiting() {
			continue
		}
		if err := s.resumeRecord(ctx, pairID, rj, nil); err != nil {
			errs = append(errs, err)
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

func cutJSON(de os.DirEntry) (string, bool) {
	name := de.Name()
	if filepath.Ext(name) != ".json" || !de.Type().IsRegular() {
		return "", false
	}
	pairID := name[:len(name)-len(".json")]
	return pairID, id.Check("pair.id", pairID) == nil
}

// recorded is what the store holds of an interrupted pair.
type recorded struct {
	timeline []orchestrator.RecordedEvent
	runLogs  map[id.Run][]orchestrator.RecordedEvent
	events   []eventlog.Event // the timeline's events, for the feed
}

// waiting reports whether a question of the pair was asked and never
// ended: its process stopped while it waited.
func (rj *recorded) waiting() bool {
	var pls []eventlog.Payload
	for _, e := range rj.timeline {
		if pl, err := orchestrator.DecodePayload(e.Kind, e.Payload); err == nil {
			if r, ok := pl.(orchestrator.Relayed); ok {
				pls = append(pls, r.Payload())
			}
		}
	}
	for _, evs := range rj.runLogs {
		for _, e := range evs {
			if pl, err := event.DecodePayload(e.Kind, e.Payload); err == nil {
				pls = append(pls, pl)
			}
		}
	}
	return len(orchestrator.ReadApprovals(slices.Values(pls)).Waiting) > 0
}

// readRecord reads the pair's timeline and the own logs of its
// interrupted runs.
func (s *Server) readRecord(ctx context.Context, rec store.PairRecord) (*recorded, error) {
	rs, ok := s.resumeStore()
	if !ok {
		return nil, errNotHere
	}
	rj := &recorded{timeline: make([]orchestrator.RecordedEvent, 0, len(rec.Events))}
	for _, en := range rec.Events {
		raw, ok := en.Event.Payload().(eventlog.Raw)
		if !ok {
			return nil, errors.New("server: a recorded event has no payload")
		}
		rj.timeline = append(rj.timeline, orchestrator.RecordedEvent{Seq: en.Event.Seq(), Kind: en.Event.Kind(), Payload: raw.Bytes()})
		rj.events = append(rj.events, en.Event)
	}
	for _, run := range rec.Runs {
		if run.Status != store.StatusInterrupted {
			continue
		}
		rr, err := rs.Run(ctx, run.ID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		evs := make([]orchestrator.RecordedEvent, 0, len(rr.Events))
		for _, en := range rr.Events {
			raw, ok := en.Event.Payload().(eventlog.Raw)
			if !ok {
				return nil, errors.New("server: a recorded event has no payload")
			}
			evs = append(evs, orchestrator.RecordedEvent{Seq: en.Event.Seq(), Kind: en.Event.Kind(), Payload: raw.Bytes()})
		}
		if rj.runLogs == nil {
			rj.runLogs = map[id.Run][]orchestrator.RecordedEvent{}
		}
		rj.runLogs[id.Run(run.ID)] = evs
	}
	return rj, nil
}

// resume continues an interrupted pair this server accepted. A refusal is
// a *resumeError.
func (s *Server) resume(ctx context.Context, pairID string, accept []id.Call) error {
	rec, err := s.cfg.Store.Pair(ctx, pairID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return &resumeError{status: http.StatusNotFound, apiError: apiError{Code: codeNotFound, Message: "no such pair"}}
	case err != nil:
		return err
	case rec.Summary.Status != store.StatusInterrupted:
		return &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeNotInterrupted,
			Message: "the pair is " + string(rec.Summary.Status) + ": only an interrupted pair resumes"}}
	}
	rj, err := s.readRecord(ctx, rec)
	if err != nil {
		return err
	}
	return s.resumeRecord(ctx, pairID, rj, accept)
}

func (s *Server) resumeRecord(ctx context.Context, pairID string, rj *recorded, accept []id.Call) error {
	rs, ok := s.resumeStore()
	if !ok {
		return errNotHere
	}
	if _, err := os.Stat(s.journalPath(pairID)); err != nil {
		return &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeNotResumable,
			Message: "the pair was not submitted to this server's data directory, or it was played by another host"}}
	}
	je, err := s.readJournal(pairID)
	if err != nil {
		return err
	}
	ws := filepath.Join(s.cfg.DataDir, "workspaces", pairID)
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeNotResumable, Message: "the pair's workspace is gone"}}
	}
	f, err := newFeed(pairID, s.cfg.StreamLag)
	if err != nil {
		return err
	}
	// The feed holds the recorded part, so that a stream sees one
	// gap-free timeline across the restart.
	for _, e := range rj.events {
		if f.Observe(ctx, e) != nil || f.broken.Load() {
			break
		}
	}
	built, err := s.callBuild(ctx, BuildRequest{PairID: pairID, Workspace: ws, Body: je.Body,
		ContentType: je.ContentType, Task: je.Task, Timeline: f})
	if err != nil {
		f.close()
		return err
	}
	drop := func() {
		f.close()
		if built.Close != nil {
			built.Close()
		}
	}
	rc := &orchestrator.ResumeConfig{Pair: *built.Config, Timeline: rj.timeline, RunLogs: rj.runLogs, Accept: accept}
	if err := rc.Check(ctx); err != nil {
		drop()
		var oe *orchestrator.ResumeError
		if !errors.As(err, &oe) {
			return err
		}
		re := &resumeError{status: http.StatusConflict, apiError: apiError{Code: oe.Reason, Message: oe.Error()}, Call: string(oe.CallID), Err: err}
		if oe.Reason == orchestrator.ReasonUncertainCall && oe.Err == nil {
			re.Message = "call " + string(oe.CallID) + " (" + oe.Tool + ") started and its outcome was never recorded; its effect may or may not have happened. Check it, then resume with accept_uncertain naming it"
		}
		return re
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		drop()
		return &resumeError{status: http.StatusServiceUnavailable, apiError: apiError{Code: codeUnavailable, Message: "the server is shutting down"}}
	}
	if old := s.pairs[pairID]; old != nil {
		select {
		case <-old.ended:
			// An earlier play of the pair, ended without its terminal:
			// the new entry takes its place.
			if i := slices.Index(s.finished, old); i >= 0 {
				s.finished = slices.Delete(s.finished, i, i+1)
				s.finishedBytes -= old.size
			}
		default:
			drop()
			return &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeClaimed, Message: "the pair is being played"}}
		}
	}
	// Of two resumes at once (here or in another process), one plays.
	switch err := rs.ClaimPair(ctx, pairID); {
	case errors.Is(err, store.ErrClaimed):
		drop()
		return &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeClaimed, Message: "the pair is being played"}}
	case errors.Is(err, store.ErrEnded):
		drop()
		return &resumeError{status: http.StatusConflict, apiError: apiError{Code: codeNotInterrupted, Message: "the pair has ended"}}
	case err != nil:
		drop()
		return err
	}
	jobID, err := s.cfg.Scheduler.Submit(ctx, scheduler.Job{Pair: built.Config, Resume: rc})
	if err != nil {
		drop()
		if errors.Is(err, scheduler.ErrQueueFull) {
			return &resumeError{status: http.StatusTooManyRequests, apiError: apiError{Code: codeQueueFull, Message: "the queue is full; retry later"}}
		}
		return err
	}
	e := &entry{id: pairID, jobID: jobID, submitted: s.cfg.Clock(), feed: f, ended: make(chan struct{})}
	s.pairs[pairID] = e
	s.wg.Add(1)
	go s.follow(e, built)
	return nil
}
