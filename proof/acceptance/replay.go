package acceptance

import (
	"bufio"
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// The transcripts the model servers play, one HTTP response per file,
// written for the proof in the wire formats of the servers they name
// (testdata/README.md).
//
//go:embed testdata/*.http
var transcripts embed.FS

// Transcript is one response a model server sends: status, headers and
// the body's server-sent events.
type Transcript struct {
	Name   string
	Status int
	Header http.Header
	Events []string // each "data: ...\n\n", as sent
	// Usage is the prompt and completion tokens of the last chunk that
	// reports usage, as the server sent them.
	Usage [2]int
	// Calls are the tool calls the chunks make, assembled: the client
	// must send them back as the assistant message of its next request.
	Calls []WireCall
}

// WireCall is a tool call as the wire carries it.
type WireCall struct {
	ID, Name, Arguments string
}

// maxTranscriptBytes bounds a transcript file, maxCalls the tool calls of
// one.
const (
	maxTranscriptBytes = 1 << 20
	maxCalls           = 64
)

// LoadTranscript parses testdata/name.
func LoadTranscript(name string) (Transcript, error) {
	raw, err := transcripts.ReadFile("testdata/" + name)
	if err != nil {
		return Transcript{}, err
	}
	return ParseTranscript(name, raw)
}

// ParseTranscript parses one HTTP/1.1 response with a server-sent-events
// body.
func ParseTranscript(name string, raw []byte) (Transcript, error) {
	if len(raw) > maxTranscriptBytes {
		return Transcript{}, fmt.Errorf("transcript %s: larger than %d bytes", name, maxTranscriptBytes)
	}
	res, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(raw)), nil)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", name, err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return Transcript{}, fmt.Errorf("transcript %s: %w", name, err)
	}
	t := Transcript{Name: name, Status: res.StatusCode, Header: res.Header}
	for ev := range strings.SplitSeq(string(body), "\n\n") {
		if strings.TrimSpace(ev) != "" {
			t.Events = append(t.Events, ev+"\n\n")
		}
	}
	if len(t.Events) == 0 {
		return Transcript{}, fmt.Errorf("transcript %s: no events", name)
	}
	for _, ev := range t.Events {
		var c struct {
			Usage *struct {
				Prompt     int `json:"prompt_tokens"`
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Index    int    `json:"index"`
						ID       string `json:"id"`
						Function struct {
							Name      string `json:"name"`
							Arguments string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok || json.Unmarshal([]byte(data), &c) != nil {
			continue
		}
		if c.Usage != nil {
			t.Usage = [2]int{c.Usage.Prompt, c.Usage.Completion}
		}
		for _, ch := range c.Choices {
			for _, tc := range ch.Delta.ToolCalls {
				if tc.Index < 0 || tc.Index > len(t.Calls) || tc.Index >= maxCalls {
					return Transcript{}, fmt.Errorf("transcript %s: tool call index %d out of order", name, tc.Index)
				}
				if tc.Index == len(t.Calls) {
					t.Calls = append(t.Calls, WireCall{})
				}
				wc := &t.Calls[tc.Index]
				wc.ID += tc.ID
				wc.Name += tc.Function.Name
				wc.Arguments += tc.Function.Arguments
			}
		}
	}
	return t, nil
}

// ModelServer is a model server on a loopback port that answers the n-th
// chat completion request with the n-th transcript, one event per write
// and flush, so the client sees the chunks arrive apart. It checks what it
// receives as the real server would before it answers: the method and
// path, a JSON body with the model it serves and `stream: true`, and the
// Authorization header (OpenAI's needs the key; the others are sent none
// by this pair). A request it refuses gets an OpenAI-shaped error (401 or
// 400) and is recorded with the reason; so is a request beyond the
// transcripts (500). Every request's body is kept for CheckProvider.
type ModelServer struct {
	srv   *httptest.Server
	list  []Transcript
	want  Expect
	order *atomic.Int64 // shared by the servers of one pair

	mu       sync.Mutex
	served   int
	received []Received
	usage    []Served
}

// Expect is what a model server requires of every request.
type Expect struct {
	// Name names the server in failures ("the writer's model server").
	Name string
	// Model is the model the requests must name.
	Model string
	// Authorization is the exact header value required; "" requires
	// none.
	Authorization string
}

// Received is one request a model server received.
type Received struct {
	Method, Path string
	// Body is the request body, at most maxRequestBytes.
	Body []byte
	// Refused says why the server refused the request, or is "".
	Refused string
}

// Served is one transcript a server played: its place among every request
// of the pair's servers, and the usage its last chunk reported.
type Served struct {
	Order int64
	Usage [2]int
}

// maxRequests bounds the requests a ModelServer records, maxRequestBytes
// the body it reads of each.
const (
	maxRequests     = 64
	maxRequestBytes = 4 << 20
)

// NewModelServer starts a server replaying list in order to requests that
// meet want; order numbers the requests of all servers that share it.
func NewModelServer(order *atomic.Int64, want Expect, list ...Transcript) *ModelServer {
	m := &ModelServer{list: list, want: want, order: order}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

// refuse answers a request the server does not accept, as OpenAI's API
// does: a status and an error object.
func refuse(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
	_, _ = w.Write(b)
}

// check is what the server verifies before it answers.
func (m *ModelServer) check(r *http.Request, body []byte) (int, string) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		return http.StatusNotFound, fmt.Sprintf("%s %s is not the chat completions endpoint", r.Method, r.URL.Path)
	}
	if got := r.Header.Get("Authorization"); got != m.want.Authorization {
		if m.want.Authorization == "" {
			return http.StatusBadRequest, "an Authorization header was sent to a server that was given no key"
		}
		// The header is never quoted: it holds the key.
		return http.StatusUnauthorized, "the Authorization header is not \"Bearer \" and the writer's API key"
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return http.StatusBadRequest, fmt.Sprintf("Content-Type %q, want application/json", ct)
	}
	var req struct {
		Model  string `json:"model"`
		Stream *bool  `json:"stream"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return http.StatusBadRequest, "the body is not a JSON object: " + err.Error()
	}
	if req.Model != m.want.Model {
		return http.StatusBadRequest, fmt.Sprintf("model %q, want %q", req.Model, m.want.Model)
	}
	if req.Stream == nil || !*req.Stream {
		return http.StatusBadRequest, "stream is not true: the server answers with server-sent events only"
	}
	return 0, ""
}

func (m *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBytes+1))
	status, why := 0, ""
	switch {
	case err != nil:
		status, why = http.StatusBadRequest, "reading the body: "+err.Error()
	case len(body) > maxRequestBytes:
		status, why = http.StatusRequestEntityTooLarge, fmt.Sprintf("a body of more than %d bytes", maxRequestBytes)
	default:
		status, why = m.check(r, body)
	}
	m.mu.Lock()
	n := m.served
	if status == 0 {
		m.served++
		if n >= len(m.list) {
			status, why = http.StatusInternalServerError, "no transcript left to play"
		}
	}
	if len(m.received) < maxRequests {
		m.received = append(m.received, Received{Method: r.Method, Path: r.URL.Path, Body: body, Refused: why})
	}
	m.mu.Unlock()
	if status != 0 {
		refuse(w, status, why)
		return
	}
	t := m.list[n]
	m.mu.Lock()
	m.usage = append(m.usage, Served{Order: m.order.Add(1), Usage: t.Usage})
	m.mu.Unlock()
	for k, vs := range t.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(t.Status)
	f, _ := w.(http.Flusher)
	for _, ev := range t.Events {
		if _, err := io.WriteString(w, ev); err != nil {
			return
		}
		if f != nil {
			f.Flush()
		}
	}
}

// URL is the API root: the server's address plus "/v1".
func (m *ModelServer) URL() string { return m.srv.URL + "/v1" }

// Client is an HTTP client for the server whose idle connections Close
// ends.
func (m *ModelServer) Client() *http.Client { return m.srv.Client() }

// Received returns every request received so far.
func (m *ModelServer) Received() []Received {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.received)
}

// Transcripts returns the transcripts the server plays, in order.
func (m *ModelServer) Transcripts() []Transcript { return m.list }

// Expect returns what the server requires of every request.
func (m *ModelServer) Expect() Expect { return m.want }

// Served returns the transcripts played so far.
func (m *ModelServer) Served() []Served {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Served(nil), m.usage...)
}

// Close stops the server and closes its client's idle connections.
func (m *ModelServer) Close() { m.srv.Close() }
