package acceptance

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/providers/openai"
	"github.com/spice-orch/spice-orch/store"
	"github.com/spice-orch/spice-orch/tools"
	"github.com/spice-orch/spice-orch/workers"
)

// The pair every part is proven on: a writer and a reviewer in a review
// loop. The writer's model server plays OpenAI's transcripts in the first
// round and vLLM's in the second (as a gateway in front of both would); the
// reviewer's plays Ollama's, rejecting the first draft and approving the
// second.
var (
	WriterTranscripts   = []string{"openai_fs_write.http", "openai_draft.http", "vllm_fs_write.http", "vllm_draft.http"}
	ReviewerTranscripts = []string{"ollama_reject.http", "ollama_approve.http"}
)

// What the pair is asked, and what the transcripts make it write.
const (
	Task      = "Write a haiku about a harbor at dawn to poem.md."
	PoemPath  = "poem.md"
	FinalPoem = "# Harbor at Dawn\n\nHarbor lights flicker\nropes creak against the tide\ngulls argue at dawn\n"
	// WriterKey is the writer's API key; it must appear in no recorded
	// byte.
	WriterKey = "sk-proof-SECRET-4b1f9c"
	// The workers' system prompts and models.
	WriterSystem   = "You write short poems to files with fs.write, then say what you wrote."
	ReviewerSystem = "You review the poem. Answer APPROVED on a line of its own when it is good."
	WriterModel    = "gpt-4o-mini"
	ReviewerModel  = "llama3.1:8b"
)

// Config is one play of the pair. Dir is required; the rest injects
// faults or extensions.
type Config struct {
	// Dir is a fresh directory: the workspace and the store go inside.
	Dir string
	// PairID defaults to "pair-proof".
	PairID string
	// Store is the required observer of both workers and the timeline;
	// nil opens a store at Dir/spice.db (closed by Played.Close).
	Store eventlog.Observer
	// Provider wraps each worker's provider (a panic injection).
	Provider func(role string, p model.Provider) model.Provider
	// Tool wraps each compiled tool (a panic injection).
	Tool func(t tool.Tool) tool.Tool
	// Transport wraps the HTTP transport of each worker's provider (a
	// fault on the wire).
	Transport func(role string, rt http.RoundTripper) http.RoundTripper
	// Timeline are further required observers of the timeline, after the
	// store (a cancellation injection).
	Timeline []eventlog.Observer
	// Cancel, if set, receives the function that cancels the pair's
	// context before the pair starts.
	Cancel func(context.CancelFunc)
	// Runtime, if set, is the runtime-tool part: the pair's plan source is
	// the plugin host's, over the compiled tools and these plugins.
	Runtime *RuntimeToolPart
	// Client, if set, is the alternate client; one that is a PairHost
	// also runs the pair.
	Client AlternateClient
	// Wait bounds the whole play. Default one minute.
	Wait time.Duration
}

// RuntimeToolPart is the runtime-tool part: plugin processes whose tools
// join the compiled tools in the pair's one leased plan (the plugin host's
// plan.Source, host.NewSource), and the transcript in which the reviewer
// calls one of them before its first review. Each play launches the
// plugins afresh and stops them after the pair.
type RuntimeToolPart struct {
	// Plugins are the plugins of the plan source, one generation each.
	Plugins []host.Config
	// Tools name the plugins' tools the reviewer may call.
	Tools []string
	// ReviewerCall is the transcript (Ollama wire format) in which the
	// reviewer calls a runtime tool; it is played before
	// ReviewerTranscripts.
	ReviewerCall Transcript
}

// AlternateClient is the alternate-client part: a client that reads the
// pair timeline the way a remote one does (ServeClient: the serve SSE
// API, read by a plain HTTP client).
type AlternateClient interface {
	// Name names the client in failures and the ledger ("serve SSE").
	Name() string
	// Attach is called once pair.started is in the timeline, on the
	// goroutine that plays the pair; it must not block.
	Attach(ctx context.Context, p *orchestrator.Pair) error
	// Timeline is called after the pair has ended and returns every event
	// the client received, each as its JSON line and "\n".
	Timeline(ctx context.Context) ([]byte, error)
}

// PairHost is an alternate client that also runs the pair, as `serve`
// does: Play hands it the pair's config and the store instead of calling
// orchestrator.Run, and it returns the pair once started. The pair then
// runs under the host's context (a scheduler job's), so Config.Cancel does
// not reach it: the cancellation sweep plays without a client.
type PairHost interface {
	Host(ctx context.Context, st *store.Store, cfg orchestrator.Config) (*orchestrator.Pair, error)
}

// Played is what one play of the pair left behind.
type Played struct {
	PairID string
	Plan   plan.Identity
	Result orchestrator.Result
	// Err is Wait's error; RunErr is orchestrator.Run's.
	Err, RunErr error
	// Subscribed is the in-process subscriber's copy of the timeline: each
	// event's canonical JSON and "\n". SubscribeErr ends it early.
	Subscribed   []byte
	SubscribeErr error
	// ClientTimeline is the alternate client's copy, ClientErr its error.
	ClientTimeline []byte
	ClientErr      error
	// Acked are the events the store acknowledged, per log.
	Acked *Acked
	// Requests are the model servers' requests, writer's then reviewer's;
	// WantRequests how many transcripts each had to play.
	Requests, WantRequests [2]int
	// Received are the requests each server received, Transcripts what it
	// had to play and Expect what it required of every request.
	Received    [2][]Received
	Transcripts [2][]Transcript
	Expect      [2]Expect
	// Tools are the definitions of the plan the pair leased, in name
	// order, as the pair's plan source handed them out.
	Tools []tool.Definition
	// Usage is what the last chunk of each transcript played reported,
	// in the order the pair's requests arrived.
	Usage [][2]int
	// Workspace is the writer's workspace directory.
	Workspace string
	// Store is the store the pair recorded to when Config.Store was nil.
	Store *store.Store
	// Runtime is the runtime-tool part's report, when it was on.
	Runtime *RuntimeReport
}

// Close closes the store Play opened.
func (p *Played) Close() error {
	if p.Store == nil {
		return nil
	}
	return p.Store.Close()
}

// Acked records what a required observer acknowledged: the canonical bytes
// of every event for which it returned nil, per log, in the order told.
type Acked struct {
	inner eventlog.Observer

	mu   sync.Mutex
	logs []string
	by   map[string][][]byte
	n    int
}

// maxAcked bounds the events one Acked keeps.
const maxAcked = 1 << 16

// NewAcked wraps o.
func NewAcked(o eventlog.Observer) *Acked { return &Acked{inner: o, by: make(map[string][][]byte)} }

// ErrTooManyEvents is Acked's answer beyond maxAcked events.
var ErrTooManyEvents = errors.New("acceptance: more events than the proof records")

// Observe tells the inner observer and records e if it acknowledged it.
func (a *Acked) Observe(ctx context.Context, e eventlog.Event) error {
	if err := a.inner.Observe(ctx, e); err != nil {
		return err
	}
	b := e.AppendJSON(nil)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.n >= maxAcked {
		return ErrTooManyEvents
	}
	a.n++
	if _, ok := a.by[e.Log()]; !ok {
		a.logs = append(a.logs, e.Log())
	}
	a.by[e.Log()] = append(a.by[e.Log()], b)
	return nil
}

// Logs returns the logs seen, in the order first seen.
func (a *Acked) Logs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.logs)
}

// Events returns the acknowledged events of log, each its canonical JSON.
func (a *Acked) Events(log string) [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.by[log])
}

// Count is the number of events acknowledged.
func (a *Acked) Count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

func loadAll(names []string) ([]Transcript, error) {
	out := make([]Transcript, 0, len(names))
	for _, n := range names {
		t, err := LoadTranscript(n)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Play builds the pair from the public packages (workers, orchestrator,
// tools, store, providers/openai) and plays it to its end.
func Play(ctx context.Context, cfg Config) (*Played, error) {
	if cfg.Dir == "" {
		return nil, errors.New("acceptance: Config.Dir is required")
	}
	if cfg.PairID == "" {
		cfg.PairID = "pair-proof"
	}
	if cfg.Wait <= 0 {
		cfg.Wait = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Wait)
	defer cancel()
	if cfg.Cancel != nil {
		cfg.Cancel(cancel)
	}
	wt, err := loadAll(WriterTranscripts)
	if err != nil {
		return nil, err
	}
	rt, err := loadAll(ReviewerTranscripts)
	if err != nil {
		return nil, err
	}
	if cfg.Runtime != nil {
		rt = append([]Transcript{cfg.Runtime.ReviewerCall}, rt...)
	}
	var order atomic.Int64
	writerSrv := NewModelServer(&order, Expect{Name: "the writer's model server", Model: WriterModel, Authorization: "Bearer " + WriterKey}, wt...)
	reviewerSrv := NewModelServer(&order, Expect{Name: "the reviewer's model server", Model: ReviewerModel}, rt...)
	defer writerSrv.Close()
	defer reviewerSrv.Close()

	out := &Played{PairID: cfg.PairID, Workspace: filepath.Join(cfg.Dir, "workspace")}
	if err := mkdir(out.Workspace); err != nil {
		return nil, err
	}
	obs := cfg.Store
	if obs == nil {
		st, err := store.Open(ctx, filepath.Join(cfg.Dir, "spice.db"))
		if err != nil {
			return nil, err
		}
		out.Store, obs = st, st
	}
	out.Acked = NewAcked(obs)

	plans, rsrc, err := buildPlan(ctx, out.Workspace, "plan-"+cfg.PairID, cfg)
	if err != nil {
		return out, err
	}
	leased := &leaseRecorder{Source: plans}
	plans = leased
	if rsrc != nil {
		// After the pair has ended (deferred calls run last in, first out).
		defer func() {
			rep := rsrc.close()
			out.Runtime = &rep
		}()
	}
	clock := &enginetest.Clock{}
	writer, err := worker(cfg, out.Acked, clock, "writer", WriterModel, WriterSystem, WriterKey, writerSrv)
	if err != nil {
		return out, err
	}
	reviewer, err := worker(cfg, out.Acked, clock, "reviewer", ReviewerModel, ReviewerSystem, "", reviewerSrv)
	if err != nil {
		return out, err
	}
	sub := &subscriber{done: make(chan struct{})}
	var clientErr error
	run := orchestrator.Run
	if h, ok := cfg.Client.(PairHost); ok {
		st := out.Store
		if st == nil {
			st, _ = cfg.Store.(*store.Store)
		}
		if st == nil {
			return out, errors.New("acceptance: a PairHost client needs a *store.Store")
		}
		run = func(ctx context.Context, oc orchestrator.Config) (*orchestrator.Pair, error) {
			return h.Host(ctx, st, oc)
		}
	}
	pair, err := run(ctx, orchestrator.Config{
		ID: cfg.PairID, Plans: plans, Clock: clock,
		First: writer, Second: reviewer,
		Pattern: orchestrator.ReviewLoop, Task: Task, MaxRounds: 3,
		Timeline: orchestrator.TimelineConfig{
			Required: append([]eventlog.Observer{out.Acked}, cfg.Timeline...),
			Delivery: orchestrator.Live,
		},
		Started: func(p *orchestrator.Pair) {
			sub.start(ctx, p)
			if cfg.Client != nil {
				clientErr = cfg.Client.Attach(ctx, p)
			}
		},
	})
	out.RunErr = err
	if pair != nil {
		out.Plan = pair.Plan()
		out.Result, out.Err = pair.Wait(context.WithoutCancel(ctx))
	}
	sub.wait()
	out.Subscribed, out.SubscribeErr = sub.buf.Bytes(), sub.err
	if cfg.Client != nil {
		out.ClientErr = clientErr
		if out.ClientErr == nil {
			out.ClientTimeline, out.ClientErr = cfg.Client.Timeline(context.WithoutCancel(ctx))
		}
	}
	out.Received = [2][]Received{writerSrv.Received(), reviewerSrv.Received()}
	out.Transcripts = [2][]Transcript{wt, rt}
	out.Expect = [2]Expect{writerSrv.Expect(), reviewerSrv.Expect()}
	out.Requests = [2]int{len(out.Received[0]), len(out.Received[1])}
	out.WantRequests = [2]int{len(wt), len(rt)}
	out.Tools = leased.definitions(out.Plan.ID)
	served := append(writerSrv.Served(), reviewerSrv.Served()...)
	slices.SortFunc(served, func(a, b Served) int { return int(a.Order - b.Order) })
	for _, s := range served {
		out.Usage = append(out.Usage, s.Usage)
	}
	return out, nil
}

// subscriber is the in-process client: it reads the timeline from the
// first event while the pair plays, until the pair terminal.
type subscriber struct {
	started atomic.Bool
	done    chan struct{}
	buf     bytes.Buffer
	err     error
}

func (s *subscriber) start(ctx context.Context, p *orchestrator.Pair) {
	s.started.Store(true)
	// Its own context: the proof reads the whole timeline even when the
	// pair's context is cancelled.
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	sub, err := p.Subscribe(sctx, 0)
	if err != nil {
		cancel()
		s.err = err
		close(s.done)
		return
	}
	go func() {
		defer close(s.done)
		defer cancel()
		defer sub.Close()
		for e, err := range sub.All(sctx) {
			if err != nil {
				s.err = err
				return
			}
			s.buf.Write(e.AppendJSON(nil))
			s.buf.WriteByte('\n')
			if orchestrator.Terminal(e.Kind()) {
				return
			}
		}
	}()
}

func (s *subscriber) wait() {
	if s.started.Load() {
		<-s.done
	}
}

// leaseRecorder is the pair's plan source as the proof sees it: it keeps
// the definitions of every plan it leased out, the tools each model
// request must offer.
type leaseRecorder struct {
	plan.Source

	mu   sync.Mutex
	defs map[plan.ID][]tool.Definition
}

func (r *leaseRecorder) record(l *plan.Lease) {
	p := l.Plan()
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.defs == nil {
		r.defs = make(map[plan.ID][]tool.Definition)
	}
	if _, ok := r.defs[p.ID()]; !ok {
		r.defs[p.ID()] = slices.Collect(p.Definitions())
	}
}

func (r *leaseRecorder) Lease(ctx context.Context) (*plan.Lease, error) {
	l, err := r.Source.Lease(ctx)
	if err == nil {
		r.record(l)
	}
	return l, err
}

func (r *leaseRecorder) LeaseExact(ctx context.Context, id plan.ID) (*plan.Lease, error) {
	l, err := r.Source.LeaseExact(ctx, id)
	if err == nil {
		r.record(l)
	}
	return l, err
}

func (r *leaseRecorder) definitions(id plan.ID) []tool.Definition {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.defs[id]
}

func buildPlan(ctx context.Context, workspace, planID string, cfg Config) (plan.Source, *runtimeSource, error) {
	ts, err := tools.New(tools.Config{Root: workspace})
	if err != nil {
		return nil, nil, err
	}
	if cfg.Tool != nil {
		for i := range ts {
			ts[i] = cfg.Tool(ts[i])
		}
	}
	if cfg.Runtime != nil {
		rs, err := newRuntimeSource(ctx, planID, ts, cfg.Runtime)
		if err != nil {
			return nil, nil, err
		}
		return rs, rs, nil
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	if err != nil {
		return nil, nil, err
	}
	pl, err := plan.New(plan.ID(planID), d)
	if err != nil {
		return nil, nil, err
	}
	m, err := plan.NewMemory(pl)
	return m, nil, err
}

func worker(cfg Config, store eventlog.Observer, clock engine.Clock, role, modelName, system, key string, srv *ModelServer) (workers.Config, error) {
	def, err := engine.NewDefinition(engine.DefinitionConfig{Name: role, Model: modelName, System: system, MaxTurns: 4})
	if err != nil {
		return workers.Config{}, err
	}
	client := srv.Client()
	if cfg.Transport != nil {
		c := *client
		c.Transport = cfg.Transport(role, c.Transport)
		client = &c
	}
	var prov model.Provider
	prov, err = openai.New(openai.Config{APIKey: key, BaseURL: srv.URL(), HTTPClient: client, MaxAttempts: 1})
	if err != nil {
		return workers.Config{}, fmt.Errorf("acceptance: %s provider: %w", role, err)
	}
	if cfg.Provider != nil {
		prov = cfg.Provider(role, prov)
	}
	return workers.Config{Role: role, Definition: def, Engine: engine.Config{
		Provider: prov, IDs: &id.Counter{Prefix: cfg.PairID + "/" + role + "/"}, Clock: clock,
		Required: []eventlog.Observer{store},
	}}, nil
}
