package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/workers"
)

// callThenAnswer is a model that answers from its request alone, as one
// with temperature 0 would: a call to "write" until a tool result is in
// the conversation, then an answer. A resumed run asks it the same.
type callThenAnswer struct{}

func (callThenAnswer) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	for m := range req.Messages() {
		if m.Role() == message.RoleTool {
			return enginetest.NewProvider(enginetest.Answer("done")).Stream(ctx, req)
		}
	}
	return enginetest.NewProvider([]model.Item{enginetest.Call("c-1", "write", `{"key":"k"}`), enginetest.Done(3, 2)}).Stream(ctx, req)
}

// writes counts the runs of the "write" tool.
type writes struct {
	mu sync.Mutex
	n  int
}

// cutAt is a required timeline observer after the store: at the first
// event whose kind it names it stops the pair, as a killed process stops,
// and tells reached.
type cutAt struct {
	kind    string
	once    sync.Once
	reached chan struct{}
}

func (c *cutAt) Observe(ctx context.Context, e eventlog.Event) error {
	if r, ok := e.Payload().(orchestrator.Relayed); !ok || r.Payload() == nil || !strings.Contains(string(e.AppendJSON(nil)), `"kind":"`+c.kind+`"`) {
		return nil
	}
	c.once.Do(func() { close(c.reached) })
	<-ctx.Done()
	return ctx.Err()
}

// resumeBuild is a BuildFunc for pairs whose writer calls an unsafe,
// mutating tool; cut, when set, stops the first pair built.
func resumeBuild(h **harness, w *writes, cut *cutAt) server.BuildFunc {
	return func(ctx context.Context, req server.BuildRequest) (server.Built, error) {
		hh := *h
		def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "write", Effect: tool.Mutating, Replay: tool.Unsafe})
		if err != nil {
			return server.Built{}, err
		}
		plans, err := enginetest.Plan("plan-1", enginetest.Tool{Def: def, Fn: func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
			w.mu.Lock()
			w.n++
			w.mu.Unlock()
			return tool.NewResult(call.ID(), "wrote")
		}})
		if err != nil {
			return server.Built{}, err
		}
		ended := make(chan struct{})
		hh.mu.Lock()
		hh.ended[req.PairID] = ended
		hh.mu.Unlock()
		timeline := []eventlog.Observer{hh.st, req.Timeline, eventlog.ObserverFunc(func(_ context.Context, e eventlog.Event) error {
			if orchestrator.Terminal(e.Kind()) {
				close(ended)
			}
			return nil
		})}
		if cut != nil {
			timeline = append(timeline, cut)
		}
		worker := func(role string, p model.Provider) workers.Config {
			d, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "scripted-1", MaxTurns: 4})
			require.NoError(hh.t, err)
			return workers.Config{Role: role, Definition: d, Engine: engine.Config{
				Provider: p, IDs: &id.Counter{Prefix: req.PairID + "/" + role + "/"}, Clock: clock,
				Required: []eventlog.Observer{hh.st}}}
		}
		return server.Built{Config: &orchestrator.Config{
			ID: req.PairID, Plans: plans, Pattern: orchestrator.Relay, Task: "test task", Clock: clock,
			First:    worker("writer", callThenAnswer{}),
			Second:   worker("reviewer", enginetest.NewProvider(enginetest.Answer("fine"))),
			Timeline: orchestrator.TimelineConfig{Required: timeline, Journal: true},
		}}, nil
	}
}

// TestR3_PostResumeContinuesAnInterruptedPairAndRefusesAnUncertainOne:
// a pair whose process stopped after its writer's unsafe call started,
// with no outcome recorded, is interrupted. POST /v1/pairs/{id}/resume on
// the next server refuses it with the typed code uncertain_tool_call,
// naming the call, and nothing is written; with accept_uncertain naming
// the call it resumes (202), the call is answered as failed and never run
// again, and the pair ends with one terminal on the same timeline. A pair
// that ended is not resumed.
func TestR3_PostResumeContinuesAnInterruptedPairAndRefusesAnUncertainOne(t *testing.T) {
	dir := t.TempDir()
	db, data := filepath.Join(dir, "runs.db"), filepath.Join(dir, "data")
	w := &writes{}
	cut := &cutAt{kind: "tool.started", reached: make(chan struct{})}
	var h1 *harness
	h1 = newHarness(t, options{pairs: 1, queue: 4, storePath: db, data: data,
		mutate: func(c *server.Config) { c.Build = resumeBuild(&h1, w, cut) }})
	pairID := h1.submit(testSpec{})
	<-cut.reached
	// The first server's process "dies": its store lets go of the pair,
	// which shows interrupted to the next one.
	require.NoError(t, h1.st.Close())

	var h2 *harness
	h2 = newHarness(t, options{pairs: 1, queue: 4, storePath: db, data: data,
		mutate: func(c *server.Config) { c.Build = resumeBuild(&h2, w, nil) }})
	r := h2.do("GET", "/v1/pairs/"+pairID, "", "")
	require.Contains(t, string(r.body), `"state":"interrupted"`)
	before := replay(t, h2.st, pairID)

	r = h2.do("POST", "/v1/pairs/"+pairID+"/resume", "", "")
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	var refused struct {
		Error struct{ Code, Message, Call string }
	}
	require.NoError(t, json.Unmarshal(r.body, &refused))
	require.Equal(t, orchestrator.ReasonUncertainCall, refused.Error.Code)
	require.Equal(t, "c-1", refused.Error.Call)
	require.Equal(t, string(before), string(replay(t, h2.st, pairID)), "a refusal writes nothing")

	r = h2.do("POST", "/v1/pairs/"+pairID+"/resume", "application/json", `{"accept_uncertain":["nope"]}`)
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, string(r.body), `"code":"uncertain_tool_call"`)
	r = h2.do("POST", "/v1/pairs/"+pairID+"/resume", "application/json", `{"accept_uncertain":[1]}`)
	require.Equal(t, http.StatusBadRequest, r.status, string(r.body))

	w.mu.Lock()
	ran := w.n
	w.mu.Unlock()
	r = h2.do("POST", "/v1/pairs/"+pairID+"/resume", "application/json", `{"accept_uncertain":["c-1"]}`)
	require.Equal(t, http.StatusAccepted, r.status, string(r.body))
	require.Equal(t, "pair.completed", oneTerminal(t, h2.wait(pairID)))
	whole := string(replay(t, h2.st, pairID))
	require.True(t, strings.HasPrefix(whole, string(before)), "the timeline continues the recorded one")
	require.Contains(t, whole, `"kind":"pair.resumed"`)
	require.Contains(t, whole, `uncertain_tool_call`)
	w.mu.Lock()
	require.Equal(t, ran, w.n, "the accepted call never ran again")
	w.mu.Unlock()

	r = h2.do("POST", "/v1/pairs/"+pairID+"/resume", "", "")
	require.Equal(t, http.StatusConflict, r.status, string(r.body))
	require.Contains(t, string(r.body), `"code":"not_interrupted"`)
	r = h2.do("POST", "/v1/pairs/no-such-pair/resume", "", "")
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))
}

// TestR3_ResumePassesTheStateChangeChecks: resuming is a state change
// like any other: it needs the token, comes from the same origin, names
// an allowed Host, and a body is JSON.
func TestR3_ResumePassesTheStateChangeChecks(t *testing.T) {
	const path = "/v1/pairs/pair-x/resume"
	body := `{"accept_uncertain":["c-1"]}`
	h := newHarness(t, options{token: secret, mutate: func(c *server.Config) { c.Hosts = []string{"orch.internal"} }})
	bearer := []string{"Authorization", "Bearer " + secret}
	r := h.do("POST", path, "application/json", body)
	require.Equal(t, http.StatusUnauthorized, r.status, string(r.body))
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://attacker.example"},
	} {
		r = h.do("POST", path, "application/json", body, append(hdr, bearer...)...)
		require.Equal(t, http.StatusForbidden, r.status, hdr)
	}
	r = h.do("POST", path, "application/json", body, append([]string{"Host", "attacker.example"}, bearer...)...)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, string(r.body), `"code":"host_refused"`)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded"} {
		require.Equal(t, http.StatusUnsupportedMediaType, h.do("POST", path, ct, body, bearer...).status, ct)
	}
	r = h.do("POST", path, "application/json", body, append([]string{"Sec-Fetch-Site", "same-origin"}, bearer...)...)
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))
}
