package compose

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/providers/coalesce"
	"github.com/spice-orch/spice-orch/providers/openai"
	"github.com/spice-orch/spice-orch/providers/scripted"
	"github.com/spice-orch/spice-orch/toolgen"
	"github.com/spice-orch/spice-orch/tools"
	"github.com/spice-orch/spice-orch/workers"
)

// Options is the input to Build.
type Options struct {
	// Spec is the validated pair spec.
	Spec spec.Spec
	// Task is the first worker's task; "" means the spec's, then
	// spec.DefaultTask.
	Task string
	// Workspace is the existing directory the file tools are confined to.
	Workspace string
	// PairID names the pair; NewPairID makes a unique one. Run IDs and the
	// plan ID derive from it, so pairs recorded in one store never collide.
	PairID string
	// Store, when set, is a required observer of every run log of both
	// workers and of the pair timeline: an event is acknowledged only once
	// it has been recorded (store.Store is one).
	Store eventlog.Observer
	// Timeline are further required observers of the pair timeline, in
	// order: what prints or streams the timeline. Each is told of an event
	// (a pair event or a relayed run event) only after Store acknowledged
	// that same event, and never of an event Store refused, so whatever a
	// Timeline observer shows is in the store (without Store, every event
	// is told). They may block, which holds the pair (backpressure); an
	// error of theirs fails the pair as Store's would.
	Timeline []eventlog.Observer
	// Getenv reads the environment (OPENAI_API_KEY, OPENAI_BASE_URL); nil
	// reads nothing.
	Getenv func(string) string
	// Clock times every event; nil means the wall clock.
	Clock engine.Clock
	// PluginEvents, when set and the spec lists plugins, is told of every
	// generation event of the pair's plugin host (host.SourceConfig.OnEvent):
	// the first plan's activation during Build, restarts while the pair
	// plays, drains at Close. It must return quickly.
	PluginEvents func(host.Event)
	// Approval is which tool calls wait for a person's approval, and how
	// long; Broker carries the questions (an *orchestrator.Approvals).
	// A policy other than never needs a Broker.
	Approval orchestrator.ApprovalConfig
	Broker   interaction.Broker
	// Journal is the directory where fs.write records the idempotency
	// keys of its writes (tools.Config.Journal); "" keeps them in memory.
	Journal string
	// MCPEvents, when set and the spec lists MCP servers, is told of every
	// generation event of the pair's MCP servers (servers.Config.OnEvent).
	// It must return quickly.
	MCPEvents func(servers.Event)
	// SharedMCP, when set, is the MCP servers every pair of a server
	// shares (serve --mcp): their current tools join the plan beside the
	// compiled tools, and a list change there reaches the pairs built
	// after it.
	SharedMCP *servers.Source
}

// tools is the configuration of the compiled tools.
func (o *Options) tools() tools.Config {
	return tools.Config{Root: o.Workspace, Journal: o.Journal}
}

// Pair is a built pair, ready for orchestrator.Start.
type Pair struct {
	Config orchestrator.Config
	// Plan is the pair's plan identity.
	Plan plan.Identity
	// Tools are the names of the tools in the plan, sorted.
	Tools []string

	closers []func()
	plugins *host.Source // nil without plugins
	// mcp are the pair's own MCP servers and the shared ones; joined
	// joins them to the compiled tools and the plugins.
	mcp    []*servers.Source
	joined *toolgen.Joined
	// defs are the plan's tool definitions: the compiled tools and, with
	// plugins, theirs, which a scripted worker's calls are checked against.
	defs map[string]tool.Definition
}

// Close releases what Build opened beside the pair: idle HTTP connections
// of the OpenAI workers. Call it after
// the pair has ended.
func (p *Pair) Close() {
	for _, c := range p.closers {
		c()
	}
	p.closers = nil
}

// ConfigError marks a mistake in what the user asked for (a spec that
// names a tool the plan lacks, an OpenAI worker without a key), as opposed
// to a failure of the machine.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// NewPairID returns "pair-YYYYMMDD-HHMMSS-xxxxxxxx": the UTC time and 32
// random bits, so that IDs sort by start and never collide in one store.
func NewPairID(now time.Time, random io.Reader) (string, error) {
	var b [4]byte
	if random == nil {
		random = rand.Reader
	}
	if _, err := io.ReadFull(random, b[:]); err != nil {
		return "", err
	}
	return "pair-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}

// Build composes the pair described by o. Errors that the user can fix in
// the spec, the flags or the environment are *ConfigError values.
func Build(o Options) (*Pair, error) {
	if err := id.Check("pair.id", o.PairID); err != nil {
		return nil, err
	}
	if o.Clock == nil {
		o.Clock = engine.ClockFunc(time.Now)
	}
	if o.Getenv == nil {
		o.Getenv = func(string) string { return "" }
	}
	if !o.Approval.Policy.IsNever() && o.Broker == nil {
		return nil, &ConfigError{bound.Missing("approval.broker")}
	}
	task := o.Task
	if task == "" {
		task = o.Spec.Task
	}
	if task == "" {
		task = spec.DefaultTask
	}
	if err := bound.Text("task", task, bound.MaxMessageBytes); err != nil {
		return nil, &ConfigError{err}
	}
	p := &Pair{}
	var plans plan.Source
	var ident plan.Identity
	var defs map[string]tool.Definition
	var err error
	if len(o.Spec.MCPServers) > 0 {
		src, err := connectMCP(context.Background(), o.Workspace, "mcp-"+o.PairID, o.Spec.MCPServers, o.MCPEvents)
		if err != nil {
			return nil, err
		}
		p.mcp = append(p.mcp, src)
		p.closers = append(p.closers, func() { _ = src.Close() })
	}
	if o.SharedMCP != nil {
		p.mcp = append(p.mcp, o.SharedMCP)
	}
	if len(o.Spec.Plugins) > 0 {
		var src *host.Source
		src, ident, defs, err = pluginPlan(o.tools(), "plan-"+o.PairID, o.Spec.Plugins, o.PluginEvents)
		if err != nil {
			p.Close()
			return nil, err
		}
		plans, p.plugins = src, src
		p.closers = append(p.closers, func() { _ = src.Close() })
	}
	switch {
	case len(p.mcp) > 0:
		var compiled []tool.Tool
		var sources []plan.Source
		prefix := "plan-" + o.PairID
		if p.plugins != nil {
			sources, prefix = append(sources, p.plugins), prefix+"-mcp"
		} else if compiled, err = tools.New(o.tools()); err != nil {
			p.Close()
			return nil, &ConfigError{err}
		}
		for _, m := range p.mcp {
			sources = append(sources, m)
		}
		if p.joined, ident, defs, err = joinPlan(prefix, compiled, sources); err != nil {
			p.Close()
			return nil, err
		}
		plans = p.joined
	case p.plugins == nil:
		if plans, ident, defs, err = buildPlan(o.tools(), "plan-"+o.PairID); err != nil {
			p.Close()
			return nil, err
		}
	}
	names := sortedNames(defs)
	p.Plan, p.Tools, p.defs = ident, names, defs
	var ws [2]workers.Config
	for i, w := range o.Spec.Workers {
		if ws[i], err = p.worker(o, workerField(i), w, names); err != nil {
			p.Close()
			return nil, err
		}
	}
	policy, err := buildPolicy(o.Spec)
	if err != nil {
		p.Close()
		return nil, &ConfigError{err}
	}
	// The timeline's log is named by the pair ID, so the store files its
	// events under the pair.
	var required []eventlog.Observer
	switch {
	case o.Store != nil && len(o.Timeline) > 0:
		required = []eventlog.Observer{&afterStore{store: o.Store, next: slices.Clone(o.Timeline)}}
	case o.Store != nil:
		required = []eventlog.Observer{o.Store}
	default:
		required = slices.Clone(o.Timeline)
	}
	pattern := orchestrator.ReviewLoop
	if o.Spec.Pattern == spec.Relay {
		pattern = orchestrator.Relay
	}
	l := o.Spec.Limits
	p.Config = orchestrator.Config{
		ID: o.PairID, Plans: plans, Clock: o.Clock,
		First: ws[0], Second: ws[1],
		Pattern: pattern, Task: task, Policy: policy, MaxRounds: l.MaxRounds,
		Budget: orchestrator.Budget{Tokens: l.Tokens, ToolCalls: l.ToolCalls, WallTime: l.WallTime},
		// The journal lets a pair that a killed process left behind
		// resume without asking a model again (runs resume).
		Timeline: orchestrator.TimelineConfig{Required: required, Journal: true},
		Approval: o.Approval,
	}
	if l.FinalAnswer {
		p.Config.OnLimit, p.Config.FinalAnswerReserve = orchestrator.AnswerAtLimit, l.FinalAnswerReserve
	}
	return p, nil
}

// buildPlan makes the one plan of the pair: the compiled tools confined to
// the workspace, behind one dispatcher.
func buildPlan(tc tools.Config, planID string) (*plan.Memory, plan.Identity, map[string]tool.Definition, error) {
	ts, err := tools.New(tc)
	if err != nil {
		return nil, plan.Identity{}, nil, &ConfigError{err}
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: ts})
	if err != nil {
		return nil, plan.Identity{}, nil, err
	}
	pl, err := plan.New(plan.ID(planID), d)
	if err != nil {
		return nil, plan.Identity{}, nil, err
	}
	mem, err := plan.NewMemory(pl)
	if err != nil {
		return nil, plan.Identity{}, nil, err
	}
	return mem, pl.Identity(), definitionsOf(pl), nil
}

// definitionsOf are a plan's tool definitions by name: what a scripted
// worker's calls are checked against.
func definitionsOf(pl plan.Plan) map[string]tool.Definition {
	defs := map[string]tool.Definition{}
	for def := range pl.Definitions() {
		defs[def.Name()] = def
	}
	return defs
}

// sortedNames are the names of defs, sorted.
func sortedNames(defs map[string]tool.Definition) []string {
	names := make([]string, 0, len(defs))
	for n := range defs {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// worker builds one worker's config: definition, provider and engine
// parts. Its run IDs are "<pair>/<role>/run-N".
func (p *Pair) worker(o Options, field string, w spec.Worker, toolNames []string) (workers.Config, error) {
	def, err := engine.NewDefinition(engine.DefinitionConfig{
		Name: w.Role, Model: w.Model, System: w.System, MaxTurns: w.MaxTurns})
	if err != nil {
		return workers.Config{}, &ConfigError{err}
	}
	prov, err := p.provider(o, field, w, toolNames)
	if err != nil {
		return workers.Config{}, err
	}
	// A worker that falls behind its model (its store or clients are
	// slower than the chunks) records the text deltas already at hand as
	// one event; streams that cannot tell (scripted) are unchanged.
	if prov, err = coalesce.New(coalesce.Config{Provider: prov}); err != nil {
		return workers.Config{}, &ConfigError{err}
	}
	// The store is not told of the run's events: the pair relays each to
	// its timeline, which the store records before the run goes on, and
	// the store reads the run's log back out of those rows. One row an
	// event instead of two is what a store's one writer has to spare when
	// hundreds of pairs stream at once.
	eng := engine.Config{Provider: prov, IDs: &id.Counter{Prefix: o.PairID + "/" + w.Role + "/"}, Clock: o.Clock, Broker: o.Broker}
	return workers.Config{Role: w.Role, Definition: def, Engine: eng}, nil
}

func (p *Pair) provider(o Options, field string, w spec.Worker, toolNames []string) (model.Provider, error) {
	switch w.Provider {
	case spec.Scripted:
		if err := checkCalls(o.Spec.File, field, w, p.defs); err != nil {
			return nil, &ConfigError{err}
		}
		prov, err := scripted.NewProvider(w.Script)
		if err != nil {
			return nil, &ConfigError{err}
		}
		return prov, nil
	case spec.OpenAI:
		cfg := openai.ConfigFromEnv(o.Getenv)
		if w.OpenAI.BaseURL != "" {
			cfg.BaseURL = w.OpenAI.BaseURL
		}
		cfg.Timeout = w.OpenAI.Timeout
		cfg.Temperature = w.OpenAI.Temperature
		cfg.MaxOutputTokens = w.OpenAI.MaxOutputTokens
		tr := http.DefaultTransport.(*http.Transport).Clone()
		cfg.HTTPClient = &http.Client{Transport: tr}
		prov, err := openai.New(cfg)
		if err != nil {
			var be *bound.Error
			if errors.As(err, &be) && be.Field == "openai.api_key" && be.Rule == bound.Required {
				err = errors.New(field + ": provider openai needs " + openai.EnvAPIKey +
					" (or a base_url / " + openai.EnvBaseURL + " for a server without keys)")
			}
			return nil, &ConfigError{err}
		}
		p.closers = append(p.closers, tr.CloseIdleConnections)
		return prov, nil
	}
	return nil, &ConfigError{bound.Malformedf(field+".provider", "unknown provider")}
}

// ToolNames returns the names of the tools every pair's plan holds, sorted.
func ToolNames() []string {
	return []string{tools.NameFSRead, tools.NameFSWrite, tools.NameTextStats}
}

func workerField(i int) string { return "workers[" + strconv.Itoa(i) + "]" }

// buildPolicy builds the handoff policy. A review pattern frames the
// reviewer's answers as "Reviewer feedback" unless the spec says otherwise,
// as the orchestrator's default policy does.
func buildPolicy(s spec.Spec) (handoff.Policy, error) {
	cfg := s.Handoff.Config()
	if s.Pattern == spec.Review {
		second := s.Workers[1].Role
		if _, ok := cfg.Headings[second]; !ok {
			h := maps.Clone(cfg.Headings)
			if h == nil {
				h = make(map[string]string, 1)
			}
			h[second] = "Reviewer feedback"
			cfg.Headings = h
		}
	}
	return handoff.NewPolicy(cfg)
}

// afterStore is the pair timeline's one required observer when there are
// Timeline observers beside the store: it tells them of an event only once
// the store acknowledged it, and not at all when the store refused it.
// The timeline tells a log's required observers in order and stops at the
// first refusal as well; afterStore makes the guarantee Options documents
// hold by construction here, whatever order a log keeps.
type afterStore struct {
	store eventlog.Observer
	next  []eventlog.Observer
}

func (a *afterStore) Observe(ctx context.Context, e eventlog.Event) error {
	if err := a.store.Observe(ctx, e); err != nil {
		return err
	}
	for _, o := range a.next {
		if err := o.Observe(ctx, e); err != nil {
			return err
		}
	}
	return nil
}
