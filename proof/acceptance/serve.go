package acceptance

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
)

// ServeClient is the alternate client: the pair is submitted to the real
// `serve` API (package server over a scheduler, on a loopback listener),
// which runs it with its feed as a required timeline observer right after
// the store, as `spice-orch serve` composes it; a plain net/http client
// reads GET /v1/pairs/{id}/events as Server-Sent Events.
type ServeClient struct {
	dir string
	// wait bounds the submission and the stream.
	wait time.Duration

	mu      sync.Mutex
	base    string
	srv     *server.Server
	hs      *http.Server
	sched   *scheduler.Scheduler
	tr      *http.Transport
	served  chan struct{}
	waited  chan struct{}
	read    chan struct{}
	buf     bytes.Buffer
	readErr error
	closed  bool
}

var (
	_ AlternateClient = (*ServeClient)(nil)
	_ PairHost        = (*ServeClient)(nil)
)

// NewServeClient returns a client whose server keeps its data (the
// workspaces it makes) under dir. Close it after the play.
func NewServeClient(dir string) *ServeClient {
	return &ServeClient{dir: dir, wait: time.Minute}
}

// Name names the client.
func (c *ServeClient) Name() string { return "serve SSE (GET /v1/pairs/{id}/events)" }

// maxSSELine bounds one line of the stream: an event's JSON and its field
// name.
const maxSSELine = eventlog.MaxEventBytes + 64

// Host starts the server, submits the pair with POST /v1/pairs and
// returns it once the scheduler has started it.
func (c *ServeClient) Host(ctx context.Context, st *store.Store, oc orchestrator.Config) (*orchestrator.Pair, error) {
	const jobID = "job-proof-1"
	sched, err := scheduler.New(scheduler.Config{Pairs: 1, Queue: 1, IDs: func(uint64) string { return jobID }})
	if err != nil {
		return nil, err
	}
	started := make(chan *orchestrator.Pair, 1)
	build := func(_ context.Context, req server.BuildRequest) (server.Built, error) {
		pc := oc
		pc.ID = req.PairID
		// The feed right after the store: it is told only what the store
		// made durable; the proof's injections come after it.
		pc.Timeline.Required = slices.Concat(oc.Timeline.Required[:1], []eventlog.Observer{req.Timeline}, oc.Timeline.Required[1:])
		user := pc.Started
		pc.Started = func(p *orchestrator.Pair) {
			started <- p
			if user != nil {
				user(p)
			}
		}
		return server.Built{Config: &pc}, nil
	}
	srv, err := server.New(server.Config{
		Scheduler: sched, Store: st, Build: build, DataDir: c.dir,
		NewPairID: func() (string, error) { return oc.ID, nil },
	})
	if err != nil {
		_ = sched.Close(context.Background())
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = srv.Close(context.Background())
		_ = sched.Close(context.Background())
		return nil, err
	}
	c.mu.Lock()
	c.srv, c.sched, c.base = srv, sched, "http://"+ln.Addr().String()
	c.hs = &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	c.tr = &http.Transport{MaxIdleConns: 2, IdleConnTimeout: time.Minute}
	c.served, c.waited = make(chan struct{}), make(chan struct{})
	hs := c.hs
	c.mu.Unlock()
	go func() {
		defer close(c.served)
		_ = hs.Serve(ln)
	}()

	rctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, c.base+"/v1/pairs", strings.NewReader("{}"))
	if err != nil {
		close(c.waited)
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client().Do(req)
	if err != nil {
		close(c.waited)
		return nil, fmt.Errorf("POST /v1/pairs: %w", err)
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		close(c.waited)
		return nil, fmt.Errorf("POST /v1/pairs: %s: %s", resp.Status, body)
	}
	ended := make(chan scheduler.Info, 1)
	go func() {
		defer close(c.waited)
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.wait)
		defer cancel()
		info, _ := sched.Wait(wctx, jobID)
		ended <- info
	}()
	select {
	case p := <-started:
		return p, nil
	case info := <-ended:
		select {
		case p := <-started:
			return p, nil
		default:
		}
		return nil, fmt.Errorf("the server's pair never started: %s %v", info.State, info.Err)
	case <-rctx.Done():
		return nil, rctx.Err()
	}
}

func (c *ServeClient) client() *http.Client {
	return &http.Client{Transport: c.tr, Timeout: c.wait}
}

// Attach opens the event stream from the start of the timeline and reads
// it on its own goroutine.
func (c *ServeClient) Attach(ctx context.Context, p *orchestrator.Pair) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.base == "" {
		return errors.New("the pair was not submitted to the server")
	}
	if c.read != nil {
		return errors.New("attached twice")
	}
	c.read = make(chan struct{})
	url := c.base + "/v1/pairs/" + p.ID() + "/events"
	go func() {
		defer close(c.read)
		c.readErr = c.readStream(context.WithoutCancel(ctx), url)
	}()
	return nil
}

// readStream reads SSE messages: each plain message's data line is one
// event; the named "end" event ends the stream.
func (c *ServeClient) readStream(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.client().Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return fmt.Errorf("GET %s: %s %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 4096), maxSSELine)
	var event string
	var data []string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			switch event {
			case "":
				for _, d := range data {
					c.buf.WriteString(d)
					c.buf.WriteByte('\n')
				}
			case "end":
				return nil
			default:
				return fmt.Errorf("the stream sent %s: %s", event, strings.Join(data, ""))
			}
			event, data = "", nil
		case strings.HasPrefix(line, ":"):
		case strings.HasPrefix(line, "event: "):
			event = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = append(data, strings.TrimPrefix(line, "data: "))
		}
	}
	if err := sc.Err(); err != nil {
		return err
	}
	return errors.New("the stream ended without its end event")
}

// Timeline waits for the stream's end, stops the server and returns what
// the stream carried.
func (c *ServeClient) Timeline(ctx context.Context) ([]byte, error) {
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read == nil {
		return nil, errors.New("never attached")
	}
	select {
	case <-read:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	if err := c.Close(); err != nil {
		return nil, err
	}
	return c.buf.Bytes(), c.readErr
}

// Close stops the HTTP server, the API server and the scheduler, and
// waits for their goroutines. The store stays the caller's.
func (c *ServeClient) Close() error {
	c.mu.Lock()
	if c.closed || c.srv == nil {
		c.closed = true
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), c.wait)
	defer cancel()
	// The API server first: it ends its open streams, which Shutdown
	// would otherwise wait for.
	err := errors.Join(c.srv.Close(ctx), c.hs.Shutdown(ctx), c.sched.Close(ctx))
	<-c.served
	<-c.waited
	if c.read != nil {
		<-c.read
	}
	c.tr.CloseIdleConnections()
	return err
}
