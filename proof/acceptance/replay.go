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
	"strings"
	"sync"
	"sync/atomic"
)

// The recorded transcripts the model servers replay, one HTTP response per
// file, in the wire formats of the servers they name (testdata/README.md).
//
//go:embed testdata/*.http
var transcripts embed.FS

// Transcript is one recorded response: status, headers and the body's
// server-sent events.
type Transcript struct {
	Name   string
	Status int
	Header http.Header
	Events []string // each "data: ...\n\n", as sent
	// Usage is the prompt and completion tokens of the last chunk that
	// reports usage, as the server sent them.
	Usage [2]int
}

// maxTranscriptBytes bounds a transcript file.
const maxTranscriptBytes = 1 << 20

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
		}
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if ok && json.Unmarshal([]byte(data), &c) == nil && c.Usage != nil {
			t.Usage = [2]int{c.Usage.Prompt, c.Usage.Completion}
		}
	}
	return t, nil
}

// ModelServer is a model server on a loopback port that answers the n-th
// chat completion request with the n-th transcript, one event per write
// and flush, so the client sees the chunks arrive apart. A request beyond
// the transcripts gets a 500 with an OpenAI-shaped error body.
type ModelServer struct {
	srv   *httptest.Server
	list  []Transcript
	order *atomic.Int64 // shared by the servers of one pair

	mu     sync.Mutex
	served int
	paths  []string
	usage  []Served
}

// Served is one transcript a server played: its place among every request
// of the pair's servers, and the usage its last chunk reported.
type Served struct {
	Order int64
	Usage [2]int
}

// maxRequests bounds the requests a ModelServer records.
const maxRequests = 64

// NewModelServer starts a server replaying list in order; order numbers
// the requests of all servers that share it.
func NewModelServer(order *atomic.Int64, list ...Transcript) *ModelServer {
	m := &ModelServer{list: list, order: order}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve))
	return m
}

func (m *ModelServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 4<<20))
	m.mu.Lock()
	n := m.served
	m.served++
	if len(m.paths) < maxRequests {
		m.paths = append(m.paths, r.Method+" "+r.URL.Path)
	}
	m.mu.Unlock()
	if n >= len(m.list) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"error":{"message":"no transcript left to replay","type":"server_error"}}`)
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

// Requests returns the method and path of every request served so far.
func (m *ModelServer) Requests() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.paths...)
}

// Served returns the transcripts played so far.
func (m *ModelServer) Served() []Served {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Served(nil), m.usage...)
}

// Close stops the server and closes its client's idle connections.
func (m *ModelServer) Close() { m.srv.Close() }
