package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/remotespec"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/jetstream"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/store"
)

// Config is one server, as the serve command's flags chose it. The caller
// has checked each value on its own; Run checks what needs the others.
type Config struct {
	Addr      string
	StorePath string // the store to record into
	DataDir   string // the pairs' workspaces; "" means serve/ beside the store
	Token     string
	Hosts     []string
	Pairs     int
	Queue     int
	ModelOps  int
	MaxConns  int
	// Pace holds an all-scripted pair after each event; Demo starts the
	// built-in pair once the server listens.
	Pace        time.Duration
	Demo        bool
	AllowOpenAI bool
	// OTel traces every pair and serves /metrics.
	OTel bool
	// Approve is the policy of a spec without approve:, ApproveTimeout
	// each question's wait.
	Approve        orchestrator.ApprovalPolicy
	ApproveTimeout time.Duration
	KeepWorkspaces int
	KeepFor        time.Duration
	// NATS, or EmbeddedNATS (a storage directory) with NATSListen, hands
	// the pairs to workers through JetStream instead of the scheduler;
	// NATSName is the job backend's name.
	NATS, EmbeddedNATS, NATSListen, NATSName string
	// MCP is a spec file whose mcp_servers every pair shares; it
	// excludes NATS, whose workers would not reach them.
	MCP string
	// Plugin, when set, is the plugin every new pair launches (plugin
	// dev --serve: its active build), and PluginDev what the page shows
	// of it.
	Plugin    func() (spec.Plugin, bool)
	PluginDev server.PluginDev

	// Stdout and Stderr take the server's messages to its operator;
	// Getenv and Version are what telemetry reads of the process.
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	Version        string

	Hooks Hooks
}

// Hooks are what tests add to a server. Any may be nil.
type Hooks struct {
	// Timeline adds observers to every pair timeline, after the feed.
	Timeline func(pairID string) []eventlog.Observer
	// Ready is called once the server listens.
	Ready func(url string)
	// Store wraps the store as the pairs' required observer.
	Store func(eventlog.Observer) eventlog.Observer
	// Setup builds the telemetry providers with OTel; nil reads the
	// environment (otelsetup.Setup).
	Setup otelsetup.SetupFunc
	// Built sees every pair config the server built, before submission.
	Built func(cfg *orchestrator.Config)
	// Question is told of each approval question once it is pending.
	Question func(orchestrator.Approval)
	// MCPEvent is told of every generation event of the MCP servers.
	MCPEvent func(servers.Event)
}

// ConfigError is a configuration the server cannot run with: bad usage.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func usage(err error) error { return &ConfigError{Err: err} }

// Run serves cfg until ctx ends or the process receives SIGINT or
// SIGTERM, then shuts the server down: every
// accepted pair ends in the store before Run returns. A configuration it
// cannot run with is a *ConfigError, a telemetry setting it does not
// understand an *otelsetup.UsageError.
func Run(ctx context.Context, cfg Config) error {
	if cfg.MCP != "" && (cfg.NATS != "" || cfg.EmbeddedNATS != "") {
		return usage(errors.New("--mcp: pairs that workers play would not reach this server's MCP servers; use it without --nats"))
	}
	approvals, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: cfg.Hooks.Question})
	if err != nil {
		return err
	}
	var tel *otelsetup.Serve
	if cfg.OTel {
		var err error
		if tel, err = otelsetup.StartServe(ctx, otelsetup.Env{Getenv: cfg.Getenv, Stderr: cfg.Stderr, Version: cfg.Version}, cfg.Hooks.Setup); err != nil {
			return err
		}
		// Deferred first, so it runs last: after the pairs have ended and
		// the store has closed, what they drew is flushed, within a bound.
		defer tel.Shutdown(cfg.Stderr)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	dataDir := cfg.DataDir
	if dataDir == "" {
		dataDir = filepath.Join(filepath.Dir(cfg.StorePath), "serve")
	}
	if dataDir, err = filepath.Abs(dataDir); err != nil {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	st, err := openStore(ctx, cfg.StorePath)
	if err != nil {
		return err
	}
	defer st.Close()
	// The server keeps what it shows of a finished pair (its feed, within
	// a byte bound, and its final state), so the scheduler need keep few
	// finished jobs, each holding its pair's whole timeline.
	var queue *jetstream.Backend
	if cfg.NATS != "" || cfg.EmbeddedNATS != "" {
		q, closeQueue, err := openQueue(ctx, cfg)
		if err != nil {
			return err
		}
		defer closeQueue()
		queue = q
	}
	var mcp *sharedMCP
	if cfg.MCP != "" {
		if mcp, err = openMCP(ctx, cfg.MCP, cfg.Approve, cfg.ApproveTimeout, approvals, cfg.Hooks.MCPEvent); err != nil {
			return err
		}
		defer mcp.close()
	}
	var sched *scheduler.Scheduler
	if queue == nil {
		if sched, err = scheduler.New(scheduler.Config{Pairs: cfg.Pairs, Queue: cfg.Queue, ModelOps: cfg.ModelOps, Retain: 16}); err != nil {
			return usage(err)
		}
	}
	shutdown := func(ctx context.Context) error {
		if sched == nil {
			return nil
		}
		return sched.Shutdown(ctx)
	}
	var rec eventlog.Observer = st
	if cfg.Hooks.Store != nil {
		rec = cfg.Hooks.Store(st)
	}
	b := &remotespec.Builder{Store: rec, Record: st, Getenv: cfg.Getenv, Pace: cfg.Pace, AllowOpenAI: cfg.AllowOpenAI, Extra: cfg.Hooks.Timeline,
		OTel: tel, Built: cfg.Hooks.Built, Approve: cfg.Approve, ApproveTimeout: cfg.ApproveTimeout, Approvals: approvals,
		Plugin: cfg.Plugin, MCP: mcp.source()}
	scfg := server.Config{
		Scheduler: sched, Store: st, Build: b.Build, DataDir: dataDir,
		Examples: Examples(), Token: cfg.Token, Hosts: cfg.Hosts, Approvals: approvals, ServerQuestions: mcp != nil,
		KeepWorkspaces: cfg.KeepWorkspaces, KeepWorkspaceAge: cfg.KeepFor, PluginDev: cfg.PluginDev,
	}
	if queue != nil {
		// Workers play the pairs: serve submits them to the queue and
		// reads them back from its events stream.
		scfg.Scheduler, scfg.Queue, scfg.Store, scfg.StorePoll = nil, queue, queue, queueStorePoll
	}
	if tel != nil && sched != nil {
		if err := tel.ObserveScheduler(sched); err != nil {
			_ = shutdown(context.Background())
			return fmt.Errorf("telemetry: %w", err)
		}
		scfg.Metrics = tel.Metrics()
		scfg.SubmitContext = tel.SubmitContext
	}
	srv, err := server.New(scfg)
	if err != nil {
		_ = shutdown(context.Background())
		return usage(err)
	}
	// Pairs an earlier serve on this data directory accepted and never
	// recorded (it was killed) are recorded as cancelled before it serves.
	if n, err := srv.Recover(ctx); err != nil {
		fmt.Fprintf(cfg.Stderr, "spice-orch serve: settling pairs accepted before a crash: %v\n", err)
	} else if n > 0 {
		fmt.Fprintf(cfg.Stderr, "spice-orch serve: %d pairs accepted before the last stop never started; recorded them as cancelled\n", n)
	}
	// Pairs it left waiting for an approval are resumed: the same
	// question is asked again, and the run goes on once it is answered.
	if n, err := srv.ResumeWaiting(ctx); err != nil {
		fmt.Fprintf(cfg.Stderr, "spice-orch serve: resuming pairs that waited for an approval: %v\n", err)
	} else if n > 0 {
		fmt.Fprintf(cfg.Stderr, "spice-orch serve: resumed %d pairs that waited for an approval\n", n)
	}
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		_ = shutdown(context.Background())
		return err
	}
	hs := srv.HTTPServer()
	served := make(chan error, 1)
	go func() { served <- hs.Serve(server.LimitListener(ln, cfg.MaxConns)) }()
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(cfg.Stdout, "spice-orch serve: %s (store %s, workspaces under %s)\n", url, cfg.StorePath, filepath.Join(dataDir, "workspaces"))
	if cfg.Token == "" {
		fmt.Fprintln(cfg.Stdout, "loopback only, no token: open the page in a browser on this machine")
	}
	if queue != nil {
		fmt.Fprintf(cfg.Stdout, "spice-orch serve: pairs go to workers through NATS at %s (backend %q)\n", queue.URL(), cfg.NATSName)
	}
	if cfg.Demo && queue == nil {
		if err := StartDemo(srv.Handler(), cfg.Token); err != nil {
			fmt.Fprintf(cfg.Stderr, "spice-orch serve: the demo pair did not start: %v\n", err)
		}
	}
	if cfg.Hooks.Ready != nil {
		cfg.Hooks.Ready(url)
	}
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}
	// The scheduler cancels the running and queued pairs while the server
	// records each one to its terminal, so that every accepted pair ends
	// in the store and every stream's end follows its pair's terminal;
	// then the streams left end, the HTTP server stops, and the store
	// closes last.
	sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	shut := make(chan error, 1)
	go func() { shut <- shutdown(sctx) }()
	closeErr := srv.Close(sctx)
	_ = hs.Shutdown(sctx)
	if err := <-shut; err != nil {
		return fmt.Errorf("shutting down: %w", err)
	}
	if closeErr != nil {
		return fmt.Errorf("shutting down: %w", closeErr)
	}
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

// openStore opens the writable store at path, creating its directory.
func openStore(ctx context.Context, path string) (*store.Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	st, err := store.OpenConfig(ctx, store.Config{Path: path})
	if err != nil {
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return st, nil
}

// The events stream is read for what is new at each poll of a followed
// pair, not from its start.
var _ server.PairReaders = (*jetstream.Backend)(nil)

// queueStorePoll is how often a stream of a pair that a worker plays
// reads the events stream for its next events.
const queueStorePoll = 100 * time.Millisecond

// openQueue connects to the NATS server of cfg.NATS, or starts one in
// this process for cfg.EmbeddedNATS, and opens the JetStream job backend
// on it. The returned func closes what it opened.
func openQueue(ctx context.Context, cfg Config) (*jetstream.Backend, func(), error) {
	if cfg.NATS != "" && cfg.EmbeddedNATS != "" {
		return nil, nil, usage(errors.New("--nats and --embedded-nats exclude each other"))
	}
	url := cfg.NATS
	stopServer := func() {}
	if cfg.EmbeddedNATS != "" {
		host, port, err := net.SplitHostPort(cfg.NATSListen)
		if err != nil {
			return nil, nil, usage(fmt.Errorf("--nats-listen: %w", err))
		}
		n, err := strconv.Atoi(port)
		if err != nil || n < 0 || n > 65535 {
			return nil, nil, usage(errors.New("--nats-listen: the port must be a number from 0 to 65535"))
		}
		// The embedded server asks its clients for no credentials, and
		// serve's token does not reach it: whoever connects could take
		// and submit jobs.
		if server.CheckListen(cfg.NATSListen, false) != nil {
			return nil, nil, usage(errors.New("--nats-listen: the embedded NATS server has no authentication and listens on a loopback address only (use --nats with a NATS server of your own for workers on other machines)"))
		}
		srv, err := jetstream.StartEmbedded(jetstream.EmbeddedConfig{Dir: cfg.EmbeddedNATS, Host: host, Port: n})
		if err != nil {
			return nil, nil, fmt.Errorf("embedded NATS: %w", err)
		}
		stopServer = func() { srv.Shutdown(); srv.WaitForShutdown() }
		url = srv.ClientURL()
		fmt.Fprintf(cfg.Stdout, "spice-orch serve: NATS with JetStream at %s (storage %s)\n", url, cfg.EmbeddedNATS)
	}
	nc, err := jetstream.Connect(url, jetstream.ConnectConfig{Name: "spice-orch serve",
		Log: slog.New(slog.NewTextHandler(cfg.Stderr, nil)).With("cmd", "serve")})
	if err != nil {
		stopServer()
		return nil, nil, fmt.Errorf("nats: %w", err)
	}
	b, err := jetstream.Open(ctx, jetstream.Config{Conn: nc, Name: cfg.NATSName})
	if err != nil {
		nc.Close()
		stopServer()
		return nil, nil, fmt.Errorf("jetstream: %w", err)
	}
	return b, func() { nc.Close(); stopServer() }, nil
}
