package server

import (
	"context"
	"net/http"
	"sync"
)

// Server serves the API, the streams and the web UI. Its methods are safe
// for concurrent use. New builds it; Close ends its streams and waits for
// its goroutines.
type Server struct {
	cfg     Config
	handler http.Handler
	routes  []route
	session string // the session cookie's value when a token is set

	streams chan struct{} // one token per open stream

	base   context.Context // ends every stream and waiter at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // waiters: one per submitted pair until it ends

	mu       sync.Mutex
	pairs    map[string]*entry // guarded by mu
	finished []string          // guarded by mu; ended pairs, oldest first
	closed   bool              // guarded by mu
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
		cfg:     cfg,
		streams: make(chan struct{}, cfg.MaxStreams),
		pairs:   make(map[string]*entry),
	}
	if cfg.Token != "" {
		s.session = sessionValue(cfg.Token)
	}
	s.base, s.cancel = context.WithCancel(context.Background())
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
		{"GET", "/v1/pairs/{id}/events", true, s.events},
		{"GET", "/v1/pairs/{id}/events.jsonl", true, s.eventsJSONL},
		{"GET", "/v1/examples", true, s.examples},
		{"GET", "/v1/openapi.json", true, s.openAPI},
		{"GET", "/{$}", false, s.index},
		{"GET", "/assets/{file}", false, s.asset},
		{"GET", "/login", false, s.loginPage},
		{"POST", "/login", false, s.login},
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

// Close refuses new pairs, ends every open stream and waits, under ctx,
// for the goroutines that follow submitted pairs: they return once their
// pair ends or at once, as Close cancels them. The scheduler and the store
// stay the host's to close.
func (s *Server) Close(ctx context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// lookup returns the pair's entry, or nil when this server does not keep
// it in memory.
func (s *Server) lookup(pairID string) *entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pairs[pairID]
}

// follow waits for the job to end, then closes its feed, lets the host
// release what it built, and keeps the entry among the Retain newest
// finished ones.
func (s *Server) follow(e *entry, built Built) {
	defer s.wg.Done()
	// Its error is about the waiting: Close cancelled it, or the job is
	// gone. Either way the feed gets no more events worth waiting for.
	_, _ = s.cfg.Scheduler.Wait(s.base, e.jobID)
	e.feed.close()
	if built.Close != nil {
		built.Close()
	}
	close(e.ended)
	s.mu.Lock()
	s.finished = append(s.finished, e.id)
	if over := len(s.finished) - s.cfg.Retain; over > 0 {
		for _, id := range s.finished[:over] {
			delete(s.pairs, id)
		}
		s.finished = append(s.finished[:0], s.finished[over:]...)
	}
	s.mu.Unlock()
}
