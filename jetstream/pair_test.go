package jetstream

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/workers"
)

// A pair worker process plays real pairs: a relay of a writer and a
// reviewer, each making one call to the mutating tool "write" and then
// answering. Its model answers from the request alone, as a model at
// temperature 0 would, and tells the test's loopback server of every
// request; its tool asks that server to do the write. The pair records
// into a SQLite store that all worker processes of a test share.

// workerTag names the worker process to the loopback server, in
// workerHeader: the chaos test holds the calls of one worker.
var workerTag string

const workerHeader = "X-Spice-Worker"

// post sends body to the test's loopback server and waits for its answer.
func post(ctx context.Context, url, body string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set(workerHeader, workerTag)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("loopback: %s", resp.Status)
	}
	return nil
}

// loopProvider makes one call to write, then answers.
type loopProvider struct {
	role string
	url  string
}

func (p *loopProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	h := sha256.New()
	asst := 0
	for m := range req.Messages() {
		if m.Role() == message.RoleAssistant {
			asst++
		}
		fmt.Fprintf(h, "%s:%d:%s|", m.Role(), m.NumCalls(), m.Text())
	}
	if err := post(ctx, p.url+"/model", p.role+":"+hex.EncodeToString(h.Sum(nil))); err != nil {
		return nil, err
	}
	items := enginetest.Answer(p.role + " done")
	if asst == 0 {
		items = []model.Item{enginetest.Call("c-"+p.role, "write", `{}`), enginetest.Done(3, 2)}
	}
	return enginetest.NewProvider(items).Stream(ctx, req)
}

// recordAttempt, set in a worker process, makes the observer through
// which a play records into its store, as a worker does
// (Backend.Attempt).
var recordAttempt func(jobID string, o eventlog.Observer) eventlog.Observer

// pairBuilder builds a job's pair as every worker process of a test does,
// recording into st unless it is nil.
func pairBuilder(st *store.Store, url string, replay tool.Replay) BuildFunc {
	return func(_ context.Context, j job.Job) (orchestrator.Config, func(), error) {
		var required []eventlog.Observer
		if st != nil {
			var o eventlog.Observer = st
			if recordAttempt != nil {
				o = recordAttempt(j.ID, o)
			}
			required = []eventlog.Observer{o}
		}
		replay := replay
		if replay == 0 { // the spec says
			replay = tool.Unsafe
			if bytes.Contains(j.Spec, []byte("[idempotent]")) {
				replay = tool.Idempotent
			}
		}
		def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "write", Effect: tool.Mutating, Replay: replay})
		if err != nil {
			return orchestrator.Config{}, nil, err
		}
		write := enginetest.Tool{Def: def, Fn: func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
			if err := post(ctx, url+"/tool", j.ID+"/"+string(call.ID())); err != nil {
				return tool.Result{}, err
			}
			return tool.NewResult(call.ID(), "wrote")
		}}
		plans, err := enginetest.Plan("plan-1", write)
		if err != nil {
			return orchestrator.Config{}, nil, err
		}
		w := func(role string) (workers.Config, error) {
			d, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: "m", System: role, MaxTurns: 4})
			return workers.Config{Role: role, Definition: d, Engine: engine.Config{
				Provider: &loopProvider{role: role, url: url}, IDs: &id.Counter{Prefix: j.ID + "/" + role + "/"},
				Clock: engine.ClockFunc(time.Now), Required: required}}, err
		}
		first, err := w("writer")
		if err != nil {
			return orchestrator.Config{}, nil, err
		}
		second, err := w("reviewer")
		if err != nil {
			return orchestrator.Config{}, nil, err
		}
		return orchestrator.Config{ID: j.ID, Plans: plans, Clock: engine.ClockFunc(time.Now), Pattern: orchestrator.Relay, Task: string(bytes.TrimSpace(j.Spec)),
			First: first, Second: second,
			Timeline: orchestrator.TimelineConfig{Required: required, Journal: true}}, nil, nil
	}
}

// playPair plays a job's pair from its start.
func playPair(build BuildFunc) PlayFunc {
	return func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
		cfg, _, err := build(ctx, j)
		if err != nil {
			rep.Reason, rep.Error = "spec_refused", err.Error()
			return rep
		}
		pair, err := orchestrator.Run(ctx, cfg)
		if err != nil {
			rep.Reason, rep.Error = "refused", err.Error()
			return rep
		}
		return PairReport(rep, pair)
	}
}

// playStreamed plays a job's pair from its start, its timeline published
// to the events stream after the pair's own observers.
func playStreamed(b *Backend, build BuildFunc, tc TimelineConfig) PlayFunc {
	return func(ctx context.Context, j job.Job) job.Report {
		rep := job.Report{ID: j.ID, Attempt: j.Attempt, State: job.Failed}
		pub, err := b.Timeline(j.ID, tc)
		if err != nil {
			rep.Reason, rep.Error = "spec_refused", err.Error()
			return rep
		}
		cfg, _, err := build(ctx, j)
		if err != nil {
			rep.Reason, rep.Error = "spec_refused", err.Error()
			return rep
		}
		cfg.Timeline.Required = append(slices.Clone(cfg.Timeline.Required), pub)
		defer func() { _ = pub.Flush(context.WithoutCancel(ctx)) }()
		pair, err := orchestrator.Run(ctx, cfg)
		if err != nil {
			rep.Reason, rep.Error = "refused", err.Error()
			return rep
		}
		return PairReport(rep, pair)
	}
}
