package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/spice-orch/spice-orch/job"
)

// codeBackendUnavailable answers a call that needs the job backend while
// its connection is down: nothing was done, and the same call may
// succeed later.
const codeBackendUnavailable = "backend_unavailable"

// healthView is GET /v1/health: what the server knows of its job
// backend without asking it.
type healthView struct {
	Backend backendView `json:"backend"`
}

type backendView struct {
	// Available is false while calls that need the backend are 503s.
	Available bool `json:"available"`
	// Name is what the backend reaches ("NATS"), or "scheduler" for the
	// in-process one, which is always available.
	Name  string     `json:"name"`
	State string     `json:"state"`
	Since *time.Time `json:"since,omitempty"`
}

// backendHealth asks the queue (or the history) for its health when it
// is a job.Monitor: a backend that cannot lose a link is available.
func (s *Server) backendHealth() (job.Health, <-chan struct{}) {
	if m, ok := s.cfg.Queue.(job.Monitor); ok {
		return m.Health()
	}
	if m, ok := s.cfg.Store.(job.Monitor); ok {
		return m.Health()
	}
	return job.Health{Available: true, Name: "scheduler", State: "in_process"}, nil
}

func viewOf(h job.Health) healthView {
	return healthView{Backend: backendView{Available: h.Available, Name: h.Name, State: h.State, Since: timePtr(h.Since)}}
}

// unavailable answers 503 backend_unavailable.
func unavailable(w http.ResponseWriter, h job.Health) {
	name := h.Name
	if name == "" {
		name = "the job backend"
	}
	w.Header().Set("Retry-After", "2")
	fail(w, http.StatusServiceUnavailable, codeBackendUnavailable, "the connection to "+name+" is down ("+h.State+"); nothing was done, retry later")
}

// health serves GET /v1/health: the backend's health as JSON, or, for a
// client that accepts text/event-stream (the page), as Server-Sent
// Events: one "health" event now and one at each change, so that the page
// shows a lost connection as it happens without polling.
func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if !strings.Contains(r.Header.Get("Accept"), "text/event-stream") {
		h, _ := s.backendHealth()
		writeJSON(w, http.StatusOK, viewOf(h))
		return
	}
	// Health streams have their own bound (Config.MaxHealthStreams):
	// a page left open holds one for as long as it is open.
	select {
	case s.healthStreams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "1")
		fail(w, http.StatusServiceUnavailable, codeTooManyStreams, "too many open health streams; retry later")
		return
	}
	defer func() {
		<-s.healthStreams
		if f := s.released.Load(); f != nil {
			(*f)()
		}
	}()
	ctx, cancel := s.streamContext(r)
	defer cancel()
	hdr := w.Header()
	hdr.Set("Content-Type", "text/event-stream")
	hdr.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sse{newWriter(w, s.cfg.WriteTimeout)}
	defer out.clearDeadline()
	out.buf = append(out.buf, "retry: 1000\n\n"...)
	var beat <-chan time.Time
	if s.cfg.Heartbeat > 0 {
		t := time.NewTicker(s.cfg.Heartbeat)
		defer t.Stop()
		beat = t.C
	}
	var sent *job.Health
	for {
		h, changed := s.backendHealth()
		if sent == nil || h != *sent {
			b, err := json.Marshal(viewOf(h))
			if err != nil {
				return
			}
			out.buf = append(out.buf, "event: health\ndata: "...)
			out.buf = append(out.buf, b...)
			out.buf = append(out.buf, "\n\n"...)
			if out.write(false) != nil {
				return
			}
			sent = &h
		}
		select {
		case <-changed: // nil for a backend that never changes: never
		case <-beat:
			if out.heartbeat() != nil {
				return
			}
		case <-ctx.Done():
			return
		}
	}
}
