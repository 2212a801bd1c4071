package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

var relaySpec = testSpec{First: []string{"draft one"}, Second: []string{"looks good"}}

func TestServeEveryRouteHappyPath(t *testing.T) {
	h := newHarness(t, options{})
	pairID := h.submit(relaySpec)
	lines, seqs := jsonLines(t, h.wait(pairID))
	require.NotEmpty(t, lines)
	require.Equal(t, uint64(len(lines)), seqs[len(seqs)-1])
	require.Contains(t, lines[0], `"kind":"pair.started"`)
	require.Contains(t, lines[len(lines)-1], `"kind":"pair.completed"`)

	r := h.do("GET", "/v1/pairs/"+pairID, "", "")
	require.Equal(t, http.StatusOK, r.status)
	var v struct {
		ID, State, Reason string
		Rounds, Runs      int
		Usage             struct{ InputTokens, OutputTokens, ToolCalls int64 } `json:"usage"`
		Workers           []struct{ Role string }
		Plan              struct{ ID string }
		LastSeq           uint64 `json:"last_seq"`
	}
	require.NoError(t, json.Unmarshal(r.body, &v))
	require.Equal(t, pairID, v.ID)
	require.Equal(t, "completed", v.State)
	require.Equal(t, "completed", v.Reason)
	require.Equal(t, 2, v.Runs)
	require.Equal(t, "plan-"+pairID, v.Plan.ID)
	require.Len(t, v.Workers, 2)
	require.Equal(t, "writer", v.Workers[0].Role)
	require.Equal(t, uint64(len(lines)), v.LastSeq)

	r = h.do("GET", "/v1/pairs", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), pairID)
	r = h.do("GET", "/v1/pairs?state=completed", "", "")
	require.Contains(t, string(r.body), pairID)
	r = h.do("GET", "/v1/pairs?state=running", "", "")
	require.NotContains(t, string(r.body), pairID)

	r = h.do("GET", "/v1/examples", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"name":"relay"`)
	r = h.do("GET", "/v1/openapi.json", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"openapi": "3.1.0"`)

	r = h.do("GET", "/", "", "")
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `<script src="/assets/app.js"`)
	require.Contains(t, r.header.Get("Content-Security-Policy"), "script-src 'self'")
	for _, a := range []string{"/assets/app.js", "/assets/style.css"} {
		require.Equal(t, http.StatusOK, h.do("GET", a, "", "").status, a)
	}
	require.Equal(t, http.StatusNotFound, h.do("GET", "/assets/..%2fopenapi.json", "", "").status)
}

// A list pages through every pair exactly once, newest first.
func TestServeListPagination(t *testing.T) {
	h := newHarness(t, options{})
	var ids []string
	for range 7 {
		id := h.submit(relaySpec)
		h.wait(id)
		ids = append(ids, id)
	}
	got := h.pageIDs(t, 3)
	newest := slices.Clone(ids)
	slices.Reverse(newest)
	require.Equal(t, newest, got, "every pair once, newest first")
}

func TestServeBadInput(t *testing.T) {
	h := newHarness(t, options{mutate: func(c *server.Config) { c.MaxBodyBytes = 1024 }})
	code := func(r response) string {
		var v struct {
			Error struct{ Code, Message, Field string }
		}
		require.NoError(t, json.Unmarshal(r.body, &v), string(r.body))
		require.NotEmpty(t, v.Error.Message)
		return v.Error.Code
	}
	r := h.do("POST", "/v1/pairs", "application/json", `{"first":["`+strings.Repeat("x", 2048)+`"]}`)
	require.Equal(t, http.StatusRequestEntityTooLarge, r.status)
	require.Equal(t, "body_too_large", code(r))

	r = h.do("POST", "/v1/pairs", "text/plain", `{}`)
	require.Equal(t, http.StatusUnsupportedMediaType, r.status)
	require.Equal(t, "unsupported_media_type", code(r))
	r = h.do("POST", "/v1/pairs", "application/x-www-form-urlencoded", `a=b`)
	require.Equal(t, http.StatusUnsupportedMediaType, r.status)

	r = h.do("POST", "/v1/pairs", "application/json", `not json`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Equal(t, "bad_spec", code(r))
	require.Contains(t, string(r.body), `request.json:1: not a test spec`)
	require.Contains(t, string(r.body), `"line":1`)

	for _, p := range []string{"/v1/pairs/pair-nope", "/v1/pairs/pair-nope/events", "/v1/pairs/pair-nope/events.jsonl"} {
		r = h.do("GET", p, "", "")
		require.Equal(t, http.StatusNotFound, r.status, p)
		require.Equal(t, "not_found", code(r))
	}
	r = h.do("POST", "/v1/pairs/pair-nope/cancel", "", "")
	require.Equal(t, http.StatusNotFound, r.status)
	r = h.do("GET", "/v1/nothing", "", "")
	require.Equal(t, http.StatusNotFound, r.status)
	require.Equal(t, "not_found", code(r))

	for _, q := range []string{"state=done", "limit=0", "limit=501", "limit=x", "cursor=%21%21"} {
		r = h.do("GET", "/v1/pairs?"+q, "", "")
		require.Equal(t, http.StatusBadRequest, r.status, q)
		require.Equal(t, "bad_request", code(r), q)
	}
	pairID := h.submit(relaySpec)
	h.wait(pairID)
	r = h.do("GET", "/v1/pairs/"+pairID+"/events?after=x", "", "")
	require.Equal(t, http.StatusBadRequest, r.status)
	r = h.do("GET", "/v1/pairs/"+pairID+"/events.jsonl?after=999", "", "")
	require.Equal(t, http.StatusRequestedRangeNotSatisfiable, r.status)
	require.Equal(t, "out_of_range", code(r))
	require.NotEmpty(t, r.header.Get("X-Recovery-Cursor"))
}

func TestServeCancelTwice(t *testing.T) {
	h := newHarness(t, options{})
	pairID := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 2})
	hd := h.holdOf(pairID)
	<-hd.reached
	r := h.do("POST", "/v1/pairs/"+pairID+"/cancel", "", "")
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	close(hd.release)
	lines, _ := jsonLines(t, h.wait(pairID))
	require.Contains(t, lines[len(lines)-1], `"kind":"pair.cancelled"`)
	r = h.do("POST", "/v1/pairs/"+pairID+"/cancel", "", "")
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, string(r.body), `"code":"pair_ended"`)
	require.Contains(t, string(r.body), "cancelled")
	r = h.do("GET", "/v1/pairs/"+pairID, "", "")
	require.Contains(t, string(r.body), `"state":"cancelled"`)
}

func TestServeFullQueue(t *testing.T) {
	h := newHarness(t, options{pairs: 1, queue: 1})
	running := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 1})
	<-h.holdOf(running).reached
	queued := h.submit(relaySpec)
	r := h.do("POST", "/v1/pairs", "application/json", `{"first":["a"],"second":["b"]}`)
	require.Equal(t, http.StatusTooManyRequests, r.status, string(r.body))
	require.Equal(t, "1", r.header.Get("Retry-After"))
	require.Contains(t, string(r.body), `"code":"queue_full"`)
	r = h.do("GET", "/v1/pairs/"+queued, "", "")
	require.Contains(t, string(r.body), `"state":"queued"`)
	// Nothing of the refused submission stays behind.
	ents, err := os.ReadDir(filepath.Join(h.data, "workspaces"))
	require.NoError(t, err)
	require.Len(t, ents, 2)
	close(h.holdOf(running).release)
	h.wait(running)
	h.wait(queued)
}

// TestS2_SpecNamingAWorkspaceIsRefused: the BuildFunc's refusal is a 400
// naming the field, and nothing stays on disk.
func TestS2_SpecNamingAWorkspaceIsRefused(t *testing.T) {
	h := newHarness(t, options{})
	r := h.do("POST", "/v1/pairs", "application/json", `{"first":["a"],"second":["b"],"workspace":"/tmp/elsewhere"}`)
	require.Equal(t, http.StatusBadRequest, r.status)
	require.Contains(t, string(r.body), `"field":"workspace"`)
	ents, err := os.ReadDir(filepath.Join(h.data, "workspaces"))
	require.NoError(t, err)
	require.Empty(t, ents)
}

// TestS1_OpenAPIMatchesRoutes: every API route is documented, and every
// documented route answers.
func TestS1_OpenAPIMatchesRoutes(t *testing.T) {
	h := newHarness(t, options{})
	r := h.do("GET", "/v1/openapi.json", "", "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	require.NoError(t, json.Unmarshal(r.body, &doc))
	require.Equal(t, "3.1.0", doc.OpenAPI)
	var documented []string
	for p, ops := range doc.Paths {
		for m := range ops {
			documented = append(documented, strings.ToUpper(m)+" "+p)
		}
	}
	require.ElementsMatch(t, server.APIRoutes(), documented)
	// Each documented route is served: an unknown pair gets the API's own
	// 404, not the mux's "no such route".
	for _, rt := range documented {
		method, path, _ := strings.Cut(rt, " ")
		path = strings.ReplaceAll(path, "{id}", "pair-nope")
		r := h.do(method, path, "application/json", "{}")
		require.NotEqual(t, http.StatusMethodNotAllowed, r.status, rt)
		require.NotContains(t, string(r.body), "no such route", rt)
	}
}

func TestServeConfigIsValidated(t *testing.T) {
	_, err := server.New(server.Config{})
	require.Error(t, err)
	_, err = server.New(server.Config{DataDir: "relative"})
	require.Error(t, err)
}

func TestServeCloseEndsStreams(t *testing.T) {
	h := newHarness(t, options{})
	pairID := h.submit(testSpec{First: []string{"a"}, Second: []string{"b"}, Hold: 3})
	<-h.holdOf(pairID).reached
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp := h.openSSE(ctx, pairID, 0, false)
	defer resp.Body.Close()
	evs, err := readSSE(t, resp.Body, func(e sseEvent) bool { return e.id == "3" })
	require.NoError(t, err)
	require.Len(t, frames(t, evs, 1), 3)
	close(h.holdOf(pairID).release)
	h.wait(pairID)
}

// The seams a telemetry host uses: a metrics handler behind the API's
// authentication, and a hook that derives each submission's context from
// its request (a traceparent header, say) and reaches the BuildFunc.
func TestServeTelemetrySeams(t *testing.T) {
	type key struct{}
	var seen []string
	h := newHarness(t, options{token: secret, mutate: func(c *server.Config) {
		c.Metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("pairs_total 1\n")) })
		c.SubmitContext = func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, key{}, r.Header.Get("traceparent"))
		}
		build := c.Build
		c.Build = func(ctx context.Context, req server.BuildRequest) (server.Built, error) {
			seen = append(seen, ctx.Value(key{}).(string))
			return build(ctx, req)
		}
	}})
	require.Equal(t, http.StatusUnauthorized, h.do("GET", "/metrics", "", "").status)
	r := h.do("GET", "/metrics", "", "", "Authorization", "Bearer "+secret)
	require.Equal(t, http.StatusOK, r.status)
	require.Equal(t, "pairs_total 1\n", string(r.body))
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	r = h.do("POST", "/v1/pairs", "application/json", `{"first":["a"],"second":["b"]}`, "Authorization", "Bearer "+secret, "traceparent", tp)
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	require.Equal(t, []string{tp}, seen)
}
