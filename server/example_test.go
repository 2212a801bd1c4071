package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/workers"
)

// A host serves pairs over HTTP: a scheduler runs them, a store records
// them, and its BuildFunc turns each submitted spec into a pair (here,
// whatever the spec says, a relay of two scripted workers). A client
// submits a pair with POST /v1/pairs and reads its timeline as JSON lines,
// which end with the pair's terminal.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "serve-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	st, err := store.Open(ctx, filepath.Join(dir, "runs.db"))
	if err != nil {
		panic(err)
	}
	defer st.Close()
	sched, err := scheduler.New(scheduler.Config{Pairs: 1, Queue: 4})
	if err != nil {
		panic(err)
	}
	defer sched.Shutdown(ctx)

	worker := func(pairID, role, answer string) workers.Config {
		def, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "scripted-1", MaxTurns: 2})
		if err != nil {
			panic(err)
		}
		return workers.Config{Role: role, Definition: def, Engine: engine.Config{
			Provider: enginetest.NewProvider(enginetest.Answer(answer)),
			IDs:      &id.Counter{Prefix: pairID + "/" + role + "/"},
			Clock:    &enginetest.Clock{},
			Required: []eventlog.Observer{st}, // every run recorded
		}}
	}
	build := func(_ context.Context, req server.BuildRequest) (server.Built, error) {
		plans, err := enginetest.Plan("plan-" + req.PairID)
		if err != nil {
			return server.Built{}, err
		}
		return server.Built{Config: &orchestrator.Config{
			ID: req.PairID, Plans: plans, Pattern: orchestrator.Relay, Task: "Greet the reader.",
			First:  worker(req.PairID, "writer", "Hello."),
			Second: worker(req.PairID, "editor", "Hello, reader."),
			// The feed follows the store, so a client is told only what
			// the store has made durable.
			Timeline: orchestrator.TimelineConfig{Required: []eventlog.Observer{st, req.Timeline}},
		}}, nil
	}
	srv, err := server.New(server.Config{Scheduler: sched, Store: st, Build: build,
		DataDir: filepath.Join(dir, "data"), NewPairID: func() (string, error) { return "pair-1", nil }})
	if err != nil {
		panic(err)
	}
	defer srv.Close(ctx)
	web := httptest.NewServer(srv.Handler()) // on loopback, so no token is needed
	defer web.Close()

	res, err := http.Post(web.URL+"/v1/pairs", "application/json", strings.NewReader(`{}`))
	if err != nil {
		panic(err)
	}
	res.Body.Close()
	fmt.Println(res.Status, res.Header.Get("Location"))

	res, err = http.Get(web.URL + "/v1/pairs/pair-1/events.jsonl")
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	lines := bufio.NewScanner(res.Body)
	for lines.Scan() {
		var e struct {
			Seq     uint64
			Kind    string
			Payload map[string]any
		}
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			panic(err)
		}
		if !strings.HasPrefix(e.Kind, orchestrator.KindPrefix) && e.Kind != "run.completed" {
			continue // the runs' other events
		}
		line := fmt.Sprint(e.Seq, " ", e.Kind)
		if w, ok := e.Payload[orchestrator.FieldWorker].(string); ok {
			line += " " + w
		}
		fmt.Println(line)
	}
	// Output:
	// 201 Created /v1/pairs/pair-1
	// 1 pair.started
	// 8 run.completed writer
	// 9 pair.handoff
	// 16 run.completed editor
	// 17 pair.completed
}
