package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
)

// RequestError is a mistake in what the client sent: a bad spec, a field
// an HTTP spec may not set. The client gets a 400 with the message, the
// field and the line. The message must name the field and the rule, never
// echo a value (a key pasted into the wrong field stays unseen).
type RequestError struct {
	Field   string // e.g. "workspace", "workers[1].max_turns"; "" for the whole body
	Line    int    // 1-based line in the body; 0 when unknown
	Message string // e.g. "request.yaml:3: workers[0].role: required"
	Err     error
}

func (e *RequestError) Error() string { return e.Message }
func (e *RequestError) Unwrap() error { return e.Err }

// Error codes of the API's error bodies.
const (
	codeBadRequest      = "bad_request"
	codeBadSpec         = "bad_spec"
	codeBodyTooLarge    = "body_too_large"
	codeUnsupportedType = "unsupported_media_type"
	codeNotFound        = "not_found"
	codeQueueFull       = "queue_full"
	codeEnded           = "pair_ended"
	codeCancelling      = "already_cancelling"
	codeUnauthorized    = "unauthorized"
	codeForbidden       = "forbidden"
	codeHost            = "host_refused"
	codeUnavailable     = "unavailable"
	codeTooManyStreams  = "too_many_streams"
	codeInternal        = "internal"
	codeMethod          = "method_not_allowed"
)

type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Field   string `json:"field,omitempty"`
	Line    int    `json:"line,omitempty"`
}

// writeError writes {"error":{...}} with status.
func writeError(w http.ResponseWriter, status int, e apiError) {
	writeJSON(w, status, struct {
		Error apiError `json:"error"`
	}{e})
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	writeError(w, status, apiError{Code: code, Message: msg})
}

// writeJSON writes v as the response body.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":{"code":"internal","message":"encoding the response failed"}}`)
	}
	b = append(b, '\n')
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// errOutOfRangeMidStream ends a JSON lines stream that cannot go on
// without a gap: JSON lines have no way to say so but to stop.
var errOutOfRangeMidStream = errors.New("server: cursor out of range")
