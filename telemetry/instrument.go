package telemetry

import (
	"context"
	"encoding/json"
	"strings"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// The methods a model provider may have for Instrument to read what it
// says of itself. Each is optional; a provider without them is drawn with
// Config.Providers, or ProviderUnknown.
type (
	// ProviderName() string: its gen_ai.provider.name ("openai").
	providerNamer interface{ ProviderName() string }
	// ServerAddress() (host string, port int): server.address and
	// server.port of its requests.
	serverAddresser interface{ ServerAddress() (string, int) }
	// RequestParams() (temperature float64, ok bool, maxTokens int64):
	// gen_ai.request.temperature (when ok) and gen_ai.request.max_tokens
	// (when positive), the same for every request.
	requestParamer interface {
		RequestParams() (float64, bool, int64)
	}
	// Unwrap() model.Provider: a decorator's provider, looked through
	// for the methods above.
	unwrapper interface{ Unwrap() model.Provider }
)

// maxUnwrap bounds how many decorators describe looks through.
const maxUnwrap = 8

// maxOpsPerWorker bounds the responses a worker's provider holds for the
// drawing; past it a response is not described (the drawing still is).
const maxOpsPerWorker = 1024

// worker is what Instrument learned of one worker of a pair: from its
// provider at once, and from each request and response as they pass.
type worker struct {
	provider  string
	host      string
	port      int
	temp      float64
	hasTemp   bool
	maxTokens int64
	// pattern is the pair's pattern, for the drawing of a resumed pair,
	// whose timeline starts after its pair.started.
	pattern string

	mu    sync.Mutex
	tools map[string]string     // tool name → description, from the requests
	ops   map[id.Operation]resp // responses not yet drawn
}

// resp is what a response said of itself, read from its provider metadata.
type resp struct {
	model, id, finish string
}

// Instrument makes cfg's pair drawn by t: it adds t to the pair's timeline
// as a best-effort observer (with Mailbox), and wraps each worker's
// provider so that its spans carry what the provider says of itself and of
// each response:
//
//   - gen_ai.provider.name from a ProviderName() string method (else
//     Config.Providers, else ProviderUnknown);
//   - server.address and server.port from ServerAddress() (string, int);
//   - gen_ai.request.temperature and gen_ai.request.max_tokens from
//     RequestParams() (float64, bool, int64);
//   - gen_ai.tool.description from the tool definitions of each request;
//   - gen_ai.response.id, .model and .finish_reasons from the "id",
//     "model" and "finish_reason" string members of the provider metadata
//     of each completed response, whatever its namespace.
//
// A decorator with an Unwrap() model.Provider method is looked through for
// these methods. The wrapper only reads: it never changes a request, an
// item or an error, and it contains its own panics. Call Instrument once per pair, before
// the pair starts; cfg.ID must be set.
func (t *Telemetry) Instrument(cfg *orchestrator.Config) {
	cfg.Timeline.BestEffort = append(cfg.Timeline.BestEffort, t)
	cfg.Timeline.Mailbox = max(cfg.Timeline.Mailbox, Mailbox)
	if cfg.ID == "" {
		return
	}
	for _, wc := range []*struct {
		role string
		p    *model.Provider
	}{{cfg.First.Role, &cfg.First.Engine.Provider}, {cfg.Second.Role, &cfg.Second.Engine.Provider}} {
		if *wc.p == nil || bound.Name("role", wc.role) != nil {
			continue
		}
		w := describe(*wc.p)
		w.pattern = cfg.Pattern.String()
		t.addWorker(cfg.ID, wc.role, w)
		*wc.p = &instrumented{Provider: *wc.p, w: w}
	}
}

// describe reads what a provider says of itself, through the decorators
// that say what they decorate.
func describe(p model.Provider) (w *worker) {
	w = &worker{tools: make(map[string]string), ops: make(map[id.Operation]resp)}
	defer func() { _ = recover() }()
	for range maxUnwrap {
		u, ok := p.(unwrapper)
		if !ok {
			break
		}
		inner := u.Unwrap()
		if inner == nil {
			break
		}
		p = inner
	}
	if n, ok := p.(providerNamer); ok {
		if name := n.ProviderName(); bound.Name("provider", name) == nil {
			w.provider = name
		}
	}
	if a, ok := p.(serverAddresser); ok {
		if host, port := a.ServerAddress(); label(host) != "" {
			w.host, w.port = host, port
		}
	}
	if r, ok := p.(requestParamer); ok {
		w.temp, w.hasTemp, w.maxTokens = r.RequestParams()
	}
	return w
}

// addWorker keeps w for the pair's drawing, forgetting the oldest pair's
// workers past twice MaxPairs.
func (t *Telemetry) addWorker(pairID, role string, w *worker) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := pairID + "\x00" + role
	if _, ok := t.workers[k]; !ok {
		t.workerOrder = append(t.workerOrder, k)
	}
	t.workers[k] = w
	for len(t.workerOrder) > 2*t.maxPairs {
		delete(t.workers, t.workerOrder[0])
		t.workerOrder = t.workerOrder[1:]
	}
}

// takeAllWorkersLocked hands every worker Instrument learned of a pair
// to its drawing, by role; t.mu held. A resumed timeline does not name
// its roles before its runs start.
func (t *Telemetry) takeAllWorkersLocked(pairID string) map[string]*worker {
	out := make(map[string]*worker, 2)
	for _, k := range t.workerOrder {
		if role, ok := strings.CutPrefix(k, pairID+"\x00"); ok {
			if w, ok := t.workers[k]; ok {
				out[role] = w
			}
		}
	}
	return out
}

// takeWorkers hands the workers Instrument learned of a pair to its
// drawing; t.mu held.
func (t *Telemetry) takeWorkersLocked(pairID string, roles ...string) map[string]*worker {
	out := make(map[string]*worker, len(roles))
	for _, role := range roles {
		k := pairID + "\x00" + role
		if w, ok := t.workers[k]; ok {
			out[role] = w
			delete(t.workers, k)
		}
	}
	return out
}

func (w *worker) noteTools(req model.Request) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for d := range req.Tools() {
		if _, ok := w.tools[d.Name()]; !ok && d.Description() != "" {
			w.tools[d.Name()] = d.Description()
		}
	}
}

func (w *worker) noteResponse(op id.Operation, md model.Metadata) {
	if md.IsZero() {
		return
	}
	var v struct {
		ID           string `json:"id"`
		Model        string `json:"model"`
		FinishReason string `json:"finish_reason"`
	}
	if json.Unmarshal([]byte(md.JSONString()), &v) != nil {
		return
	}
	r := resp{model: label(v.Model), id: label(v.ID), finish: label(v.FinishReason)}
	if r == (resp{}) {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.ops) < maxOpsPerWorker {
		w.ops[op] = r
	}
}

// maxLabel bounds a response value or a server host drawn on a span.
const maxLabel = 256

// label keeps a response value that is short printable text, and drops
// any other: metadata is the server's.
func label(s string) string {
	if len(s) > maxLabel {
		return ""
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return ""
		}
	}
	return s
}

func (w *worker) takeResponse(op id.Operation) (resp, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	r, ok := w.ops[op]
	delete(w.ops, op)
	return r, ok
}

func (w *worker) toolDescription(name string) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.tools[name]
}

// instrumented is a worker's provider as Instrument wraps it.
type instrumented struct {
	model.Provider
	w *worker
}

// ProviderName keeps the wrapped provider's name readable (ProviderNames).
func (p *instrumented) ProviderName() string { return p.w.provider }

func (p *instrumented) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	func() {
		defer func() { _ = recover() }()
		p.w.noteTools(req)
	}()
	s, err := p.Provider.Stream(ctx, req)
	if err != nil || s == nil {
		return s, err
	}
	return &instrumentedStream{Stream: s, w: p.w, op: req.Operation()}, nil
}

type instrumentedStream struct {
	model.Stream
	w  *worker
	op id.Operation
}

func (s *instrumentedStream) Recv() (model.Item, error) {
	it, err := s.Stream.Recv()
	if err == nil && it.Kind() == model.KindCompleted {
		func() {
			defer func() { _ = recover() }()
			s.w.noteResponse(s.op, it.Metadata())
		}()
	}
	return it, err
}
