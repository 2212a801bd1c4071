package server

import (
	"net/http"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// events serves GET /v1/pairs/{id}/events as Server-Sent Events: each
// timeline event is a message whose id is its sequence and whose data is
// its canonical JSON; "out_of_range" and "end" are named events; idle
// streams get heartbeat comments.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	e, after, release, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.streamContext(r)
	defer cancel()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	out := &sse{newWriter(w, s.cfg.WriteTimeout)}
	defer out.clearDeadline()
	out.buf = append(out.buf, "retry: 1000\n\n"...)
	if out.write(false) != nil {
		return
	}
	// The stream's end is its own answer: a slow or gone client is simply
	// disconnected and resumes with Last-Event-ID.
	_ = s.stream(ctx, r.PathValue("id"), e, after, out)
}

type sse struct{ *writer }

func (o *sse) event(e eventlog.Event, more bool) error {
	o.buf = append(o.buf, "id: "...)
	o.buf = strconv.AppendUint(o.buf, e.Seq(), 10)
	o.buf = append(o.buf, "\ndata: "...)
	// Canonical JSON never holds a raw newline: one data line.
	o.buf = e.AppendJSON(o.buf)
	o.buf = append(o.buf, "\n\n"...)
	return o.write(more)
}

func (o *sse) outOfRange(last, recovery uint64) error {
	o.buf = append(o.buf, "event: out_of_range\ndata: {\"last_delivered\":"...)
	o.buf = strconv.AppendUint(o.buf, last, 10)
	o.buf = append(o.buf, `,"recovery":`...)
	o.buf = strconv.AppendUint(o.buf, recovery, 10)
	o.buf = append(o.buf, "}\n\n"...)
	return o.write(false)
}

func (o *sse) heartbeat() error {
	o.buf = append(o.buf, ": heartbeat\n\n"...)
	return o.write(false)
}

func (o *sse) end(state string, last uint64) error {
	o.buf = append(o.buf, "event: end\ndata: {\"state\":"...)
	o.buf = eventlog.AppendString(o.buf, state)
	o.buf = append(o.buf, `,"last_seq":`...)
	o.buf = strconv.AppendUint(o.buf, last, 10)
	o.buf = append(o.buf, "}\n\n"...)
	return o.write(false)
}

// eventsJSONL serves GET /v1/pairs/{id}/events.jsonl: the timeline after
// the cursor as JSON lines, following a live pair to its terminal — byte
// for byte what `run --json` prints. A cursor past the end is a 416 with
// the recovery cursor.
func (s *Server) eventsJSONL(w http.ResponseWriter, r *http.Request) {
	e, after, release, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer release()
	ctx, cancel := s.streamContext(r)
	defer cancel()
	out := &jsonl{writer: newWriter(w, s.cfg.WriteTimeout)}
	defer out.clearDeadline()
	_ = s.stream(ctx, r.PathValue("id"), e, after, out)
	if !out.started && out.oor == nil {
		out.header()
		_ = out.rc.Flush()
	}
}

type jsonl struct {
	*writer
	started bool
	oor     *apiError
}

func (o *jsonl) header() {
	o.started = true
	o.w.Header().Set("Content-Type", "application/jsonl")
	o.w.WriteHeader(http.StatusOK)
}

func (o *jsonl) event(e eventlog.Event, more bool) error {
	if !o.started {
		o.header()
	}
	o.buf = e.AppendJSON(o.buf)
	o.buf = append(o.buf, '\n')
	return o.write(more)
}

func (o *jsonl) outOfRange(last, recovery uint64) error {
	if o.started {
		return errOutOfRangeMidStream
	}
	o.oor = &apiError{Code: "out_of_range", Field: "after",
		Message: "cursor " + strconv.FormatUint(last, 10) + " is out of range; resume from " + strconv.FormatUint(recovery, 10)}
	o.w.Header().Set("X-Recovery-Cursor", strconv.FormatUint(recovery, 10))
	writeError(o.w, http.StatusRequestedRangeNotSatisfiable, *o.oor)
	return errOutOfRangeMidStream
}

func (o *jsonl) heartbeat() error { return nil }

func (o *jsonl) end(string, uint64) error {
	if !o.started {
		o.header()
	}
	return o.rc.Flush()
}
