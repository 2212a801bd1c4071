package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/server"
)

// EnvToken, when set, is the token `serve` requires when --token is not
// given.
const EnvToken = "SPICE_ORCH_TOKEN"

type serveFlags struct {
	addr        string
	store       string
	dataDir     string
	token       string
	hosts       []string
	pairs       int
	queue       int
	modelOps    int
	maxConns    int
	pace        time.Duration
	demo        bool
	allowOpenAI bool
	otel        bool
	// approve is the policy of a spec without approve: ("" means
	// mutating); approveTimeout bounds each question's wait (0: the
	// default).
	approve        string
	approveTimeout time.Duration
	keepPairs      int
	keepFor        time.Duration
	// nats, or embeddedNATS (a storage directory) with natsListen, hands
	// the pairs to workers through JetStream instead of the scheduler.
	nats, embeddedNATS, natsListen, natsName string
	// mcp is a spec file whose mcp_servers every pair shares.
	mcp string
}

// serveHooks are what tests add to a server: observers of every pair
// timeline after the feed, and a call once it listens.
type serveHooks struct {
	timeline func(pairID string) []eventlog.Observer
	ready    func(url string)
	// store wraps the store as the pairs' required observer.
	store func(eventlog.Observer) eventlog.Observer
	// setup builds the telemetry providers with --otel; nil reads the
	// environment (otelsetup.Setup).
	setup otelsetup.SetupFunc
	// built sees every pair config the server built, before submission.
	built func(cfg *orchestrator.Config)
	// question is told of each approval question once it is pending.
	question func(orchestrator.Approval)
	// plugin, from plugin dev --serve, is the plugin every new pair
	// launches (its active build) and pluginDev what the page shows of it.
	plugin    func() (spec.Plugin, bool)
	pluginDev server.PluginDev
	// mcpEvent is told of every generation event of the --mcp servers.
	mcpEvent func(servers.Event)
}

func newServeCmd(env Env) *cobra.Command {
	var f serveFlags
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the HTTP API and the live web timeline",
		Long: `Serve an HTTP API under /v1 and a web UI at / that shows pairs live: one
lane per worker, streamed text, tool calls, handoffs drawn between the
lanes, and the raw JSON of every event. Pairs are started from the page
or with POST /v1/pairs, run by a scheduler (--pairs at once, --queue
waiting), and recorded in the same store as 'run'.

Every stream a client reads is the pair timeline byte for byte, and holds
only events the store has made durable; GET /v1/pairs/ID/events.jsonl is
what 'run --json' prints. The API is described at /v1/openapi.json.

Security: without --token (or $SPICE_ORCH_TOKEN) the server listens on
loopback only and refuses any Host that is not a loopback name (DNS
rebinding). With a token every API call needs 'Authorization: Bearer
TOKEN' and the page asks for it. A spec sent over HTTP may not name a
workspace: each pair gets its own under --data-dir. Workers with provider
openai are refused unless --allow-openai, and never with a base_url.
Every read is bounded (headers 10s, a body 30s, an idle connection 2m);
a request without the token is answered at once and its connection
closed, and when --max-conns are open the oldest connection that never
made an accepted request is closed to make room.

A 201 is durable: each accepted pair ends with one terminal in the
store. On SIGTERM, running and queued pairs are cancelled and recorded
(every stream gets the terminal, then end); pairs a killed serve
accepted and never started are recorded as cancelled by the next serve
on the same --data-dir.

With --otel every pair is traced as by 'run --otel' (the OTEL_*
environment), a POST /v1/pairs with a W3C traceparent header continues
that trace, and GET /metrics serves Prometheus metrics behind the same
token as the API: token usage, operation durations, pairs ended, tool
calls, and the scheduler's queue depth and running pairs. Without
--otel there is no /metrics and the OTEL_* environment is not read.

Approval before side effects: a tool call that the policy names waits
until a person answers it through the API (GET /v1/pairs/ID/approvals,
POST /v1/pairs/ID/approvals/QUESTION with the question's digest), or
until --approve-timeout denies it. A spec's approve: field chooses its
policy; a spec without one gets --approve (default mutating).

Built-in scripted pairs are paced (--pace) so they can be watched; --demo
starts one at start-up.

With --nats URL, or --embedded-nats DIR (a NATS server in this process,
JetStream storage in DIR, listening on --nats-listen), serve runs no
pair itself: it submits each pair's spec to JetStream, 'spice-orch
worker' processes play it, and serve streams the pair's timeline from
JetStream's events stream, the same frames as above.`,
		Example: `  spice-orch serve
  spice-orch serve --addr 127.0.0.1:8080 --pairs 8 --queue 256
  OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 spice-orch serve --otel
  SPICE_ORCH_TOKEN=$(openssl rand -hex 16) spice-orch serve --addr 0.0.0.0:7070 --host orch.example.com`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.token == "" {
				f.token = env.Getenv(EnvToken)
			}
			return runServe(cmd.Context(), env, f, serveHooks{})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.addr, "addr", "127.0.0.1:7070", "address to listen on (loopback only without a token)")
	fl.StringVar(&f.store, "store", "", "the store to record into (default as for 'run')")
	fl.StringVar(&f.dataDir, "data-dir", "", "directory for the pairs' workspaces (default: serve/ beside the store)")
	fl.StringVar(&f.token, "token", "", "require this bearer token (default $"+EnvToken+")")
	fl.StringSliceVar(&f.hosts, "host", nil, "a further Host name to accept (repeatable)")
	fl.IntVar(&f.pairs, "pairs", scheduler.DefaultPairs, "pairs that run at once")
	fl.IntVar(&f.queue, "queue", 256, "pairs that may wait to start; more get 429")
	fl.IntVar(&f.modelOps, "model-ops", 0, "model operations in flight across all pairs (0: no bound beyond --pairs)")
	fl.IntVar(&f.maxConns, "max-conns", 1024, "open connections at most")
	fl.DurationVar(&f.pace, "pace", 150*time.Millisecond, "pause after each timeline event of an all-scripted pair, so it can be watched (0: full speed)")
	fl.BoolVar(&f.demo, "demo", true, "start the built-in pair once at start-up")
	fl.BoolVar(&f.allowOpenAI, "allow-openai", false, "allow specs with provider openai (they spend this server's $OPENAI_API_KEY)")
	fl.BoolVar(&f.otel, "otel", false, serveOTelHelp)
	fl.StringVar(&f.approve, "approve", "mutating", "which tool calls of a spec without approve: wait for an answer through the API: never, mutating, all, or tool names")
	fl.StringVar(&f.nats, "nats", "", "hand pairs to 'spice-orch worker' processes through this NATS JetStream server, and stream them from it")
	fl.StringVar(&f.embeddedNATS, "embedded-nats", "", "as --nats, with a NATS server started in this process that keeps JetStream's storage in this directory")
	fl.StringVar(&f.natsListen, "nats-listen", "127.0.0.1:4222", "where the --embedded-nats server listens for workers: a loopback address (it asks for no credentials)")
	fl.StringVar(&f.natsName, "nats-backend", "spice", "the job backend's name on the NATS server (as worker --name)")
	fl.DurationVar(&f.approveTimeout, "approve-timeout", orchestrator.DefaultApprovalTimeout, "how long a call waits for its approval; no answer in time denies it")
	fl.StringVar(&f.mcp, "mcp", "", "connect the mcp_servers of this spec file once; every pair gets their current tools (docs/mcp.md)")
	fl.IntVar(&f.keepPairs, "keep-workspaces", 0, "keep the workspaces of the newest N ended pairs, removing older ones (0: no count bound)")
	fl.DurationVar(&f.keepFor, "keep-workspaces-for", 0, "remove an ended pair's workspace once it is older than this, e.g. 168h (0: no age bound)")
	return cmd
}

func runServe(ctx context.Context, env Env, f serveFlags, hooks serveHooks) error {
	if err := server.CheckListen(f.addr, f.token != ""); err != nil {
		return usageErr(err)
	}
	if f.pace < 0 || f.pace > time.Minute {
		return usageErr(errors.New("--pace must be between 0 and 1m"))
	}
	if f.keepPairs < 0 || f.keepPairs > server.MaxRetain {
		return usageErr(fmt.Errorf("--keep-workspaces must be between 0 and %d", server.MaxRetain))
	}
	if f.keepFor < 0 {
		return usageErr(errors.New("--keep-workspaces-for must not be negative"))
	}
	if f.maxConns < 1 {
		return usageErr(errors.New("--max-conns must be at least 1"))
	}
	policy := orchestrator.ApproveMutating
	if f.approve != "" {
		var err error
		if policy, err = orchestrator.ParseApprovalPolicy(f.approve); err != nil {
			return usageErr(fmt.Errorf("--approve: want never, mutating, all, or tool names separated by commas: %w", err))
		}
	}
	if f.approveTimeout == 0 {
		f.approveTimeout = orchestrator.DefaultApprovalTimeout
	}
	if f.approveTimeout < 0 || f.approveTimeout > orchestrator.MaxApprovalTimeout {
		return usageErr(errors.New("--approve-timeout: must be between 0 and 24h, not included 0"))
	}
	stPath, err := storePath(f.store, env.Getenv)
	if err != nil {
		return usageErr(err)
	}
	err = serve.Run(ctx, serve.Config{
		Addr: f.addr, StorePath: stPath, DataDir: f.dataDir, Token: f.token, Hosts: f.hosts,
		Pairs: f.pairs, Queue: f.queue, ModelOps: f.modelOps, MaxConns: f.maxConns,
		Pace: f.pace, Demo: f.demo, AllowOpenAI: f.allowOpenAI, OTel: f.otel,
		Approve: policy, ApproveTimeout: f.approveTimeout, KeepWorkspaces: f.keepPairs, KeepFor: f.keepFor,
		NATS: f.nats, EmbeddedNATS: f.embeddedNATS, NATSListen: f.natsListen, NATSName: f.natsName,
		MCP: f.mcp, Plugin: hooks.plugin, PluginDev: hooks.pluginDev,
		Stdout: env.Stdout, Stderr: env.Stderr, Getenv: env.Getenv, Version: version(),
		Hooks: serve.Hooks{Timeline: hooks.timeline, Ready: hooks.ready, Store: hooks.store, Setup: hooks.setup,
			Built: hooks.built, Question: hooks.question, MCPEvent: hooks.mcpEvent},
	})
	var ce *serve.ConfigError
	if errors.As(err, &ce) {
		return usageErr(ce.Err)
	}
	// A bad OTEL_* setting is bad usage too; anything else is a failure.
	return otelErr(err)
}
