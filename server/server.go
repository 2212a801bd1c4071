package server

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
)

// Server serves the API, the streams and the web UI. Its methods are safe
// for concurrent use. New builds it; Close ends its streams and waits for
// its goroutines.
type Server struct {
	cfg     Config
	handler http.Handler
	routes  []route
	session string // the session cookie's value when a token is set

	streams       chan struct{} // one token per open stream of a pair
	healthStreams chan struct{} // one token per open health stream
	// released, when a test sets it, is told each time a stream gives
	// its slot back.
	released atomic.Pointer[func()]

	base   context.Context // ends every stream at Close
	cancel context.CancelFunc
	// following ends the followers' waits, should Close give up on them.
	following     context.Context
	stopFollowing context.CancelFunc
	wg            sync.WaitGroup // followers: one per submitted pair until it ends

	mu            sync.Mutex
	pairs         map[string]*entry // guarded by mu
	finished      []*entry          // guarded by mu; ended pairs kept, oldest first
	finishedBytes int64             // guarded by mu; what their feeds hold
	closed        bool              // guarded by mu
	cutting       bool              // guarded by mu; Close ends the streams left
	tailing       sync.WaitGroup    // streams following a feed, counted until cutting
}

// route is one entry of the server's routing table; the OpenAPI document
// lists every route with api set, and its test checks both ways.
type route struct {
	method, path string
	api          bool
	handle       http.HandlerFunc
}

// New validates cfg and returns a server. It starts no goroutine until a
// pair is submitted.
func New(cfg Config) (*Server, error) {
	if err := cfg.normalize(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:           cfg,
		streams:       make(chan struct{}, cfg.MaxStreams),
		healthStreams: make(chan struct{}, cfg.MaxHealthStreams),
		pairs:         make(map[string]*entry),
	}
	if cfg.Token != "" {
		s.session = sessionValue(cfg.Token)
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.following, s.stopFollowing = context.WithCancel(context.Background())
	s.routes = s.table()
	s.handler = s.build()
	return s, nil
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// HTTPServer returns an http.Server for the handler with every read
// bounded: headers by Config.HeaderTimeout, a kept-alive connection
// between requests by Config.IdleTimeout, and (in the handler) a body by
// Config.BodyTimeout. Serve it on a LimitListener.
func (s *Server) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		IdleTimeout:       s.cfg.IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ConnContext:       withConn,
	}
}

func (s *Server) table() []route {
	r := []route{
		{"GET", "/v1/pairs", true, s.listPairs},
		{"POST", "/v1/pairs", true, s.createPair},
		{"GET", "/v1/pairs/{id}", true, s.getPair},
		{"POST", "/v1/pairs/{id}/cancel", true, s.cancelPair},
		{"POST", "/v1/pairs/{id}/resume", true, s.resumePair},
		{"GET", "/v1/pairs/{id}/approvals", true, s.listApprovals},
		{"POST", "/v1/pairs/{id}/approvals/{question...}", true, s.answerApproval},
		{"GET", "/v1/pairs/{id}/events", true, s.events},
		{"GET", "/v1/pairs/{id}/events.jsonl", true, s.eventsJSONL},
		{"GET", "/v1/examples", true, s.examples},
		{"GET", "/v1/health", true, s.health},
		{"GET", "/v1/openapi.json", true, s.openAPI},
		{"GET", "/v1/plugin-dev", true, s.pluginDev},
		{"GET", "/{$}", false, s.index},
		{"GET", "/assets/{file}", false, s.asset},
		{"GET", "/login", false, s.loginPage},
		{"POST", "/login", false, s.login},
		{"POST", "/logout", false, s.logout},
		{"GET", "/favicon.ico", false, s.favicon},
	}
	if s.cfg.Metrics != nil {
		r = append(r, route{"GET", "/metrics", false, s.cfg.Metrics.ServeHTTP})
	}
	return r
}

func (s *Server) build() http.Handler {
	mux := http.NewServeMux()
	for _, r := range s.routes {
		mux.HandleFunc(r.method+" "+r.path, r.handle)
	}
	// Unknown API paths and methods answer in the API's error shape.
	mux.HandleFunc("/v1/", func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusNotFound, codeNotFound, "no such route")
	})
	cop := http.NewCrossOriginProtection()
	cop.SetDenyHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fail(w, http.StatusForbidden, codeForbidden, "cross-origin request refused")
	}))
	return s.guard(cop.Handler(mux))
}

// Close refuses new pairs and waits, under ctx, until every pair it
// accepted has ended and is recorded to its terminal: the host ends them,
// with Scheduler.Shutdown, before or while Close waits. A pair cancelled
// before it started is recorded then too, its timeline ending with
// pair.cancelled. Then Close ends the streams still open. If ctx ends
// first, Close stops waiting, ends the streams and returns ctx's error.
// The scheduler and the store stay the host's to close.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
		s.stopFollowing()
	}
	// Streams that follow a feed end on their own now that every feed is
	// closed, each with its pair's terminal and end: let them.
	s.mu.Lock()
	s.cutting = true
	s.mu.Unlock()
	tailed := make(chan struct{})
	go func() { s.tailing.Wait(); close(tailed) }()
	select {
	case <-tailed:
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.cancel()
	<-tailed
	return err
}

// tail counts a stream that follows a feed, which Close lets end on its
// own; false once Close no longer waits for such streams.
func (s *Server) tail() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cutting {
		return false
	}
	s.tailing.Add(1)
	return true
}

// lookup returns the pair's entry, or nil when this server does not keep
// it in memory.
func (s *Server) lookup(pairID string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pairs[pairID]
}

// follow waits for the job to end, records a pair that never started,
// then closes its feed — so that every stream's end follows the pair's
// terminal — lets the host release what it built, and keeps the entry
// among the finished ones while they fit in Retain and RetainBytes.
func (s *Server) follow(e *entry, built Built) {
	defer s.wg.Done()
	info, err := s.cfg.Scheduler.Wait(s.following, e.jobID)
	if err == nil && info.State == scheduler.Cancelled && e.feed.log.Stats().LastSeq == 0 {
		recordCancelled(built.Config)
	}
	if err != nil {
		info = scheduler.Info{ID: e.jobID, State: scheduler.Failed, Err: err}
	} else if e.feed.ended.Load() {
		// The terminal is in the store. A pair whose terminal the
		// store did not take keeps its file: to the next server it is
		// interrupted, and it can be resumed.
		s.settle(e.id)
	}
	e.final = info
	// Before the feed closes, so a stream's end follows the pruning.
	s.pruneWorkspaces(e.id)
	e.feed.close()
	if built.Close != nil {
		built.Close()
	}
	close(e.ended)
	size := int64(e.feed.log.Stats().RetainedBytes)
	s.mu.Lock()
	e.size = size
	s.finished = append(s.finished, e)
	s.finishedBytes += size
	over := 0
	for over < len(s.finished) && (len(s.finished)-over > s.cfg.Retain || s.finishedBytes > s.cfg.RetainBytes) {
		old := s.finished[over]
		delete(s.pairs, old.id)
		s.finishedBytes -= old.size
		over++
	}
	s.finished = append(s.finished[:0], s.finished[over:]...)
	s.mu.Unlock()
}

// recordCancelled plays a pair that was cancelled before it started, as
// cancelled from its first event on: its timeline (the store, the feed)
// gets pair.started and pair.cancelled, and no run starts.
func recordCancelled(cfg *orchestrator.Config) {
	defer func() { _ = recover() }() // the orchestrator contains its own; this is the host's config
	c := *cfg
	c.Started = func(p *orchestrator.Pair) { p.Cancel() }
	_, _ = orchestrator.Run(context.Background(), c)
}
