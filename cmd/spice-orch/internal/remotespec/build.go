package remotespec

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/mcplog"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/otelsetup"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/toolgen"
)

// Builder turns a spec that arrived over HTTP into a pair. Such a spec is
// untrusted: it may not choose a place on this machine's file system (the
// server gives the pair its workspace), nor spend this server's API key
// unless the operator allowed it, nor point a worker at another server.
type Builder struct {
	Store  eventlog.Observer // the store, or what stands for it, as each pair's required observer
	Record eventlog.Observer // the store itself, for the pairs' trace records
	Getenv func(string) string
	// Pace holds an all-scripted pair after each event (0: full speed).
	Pace time.Duration
	// AllowOpenAI lets a spec use provider openai, and so this process's
	// API key.
	AllowOpenAI bool
	// Extra adds observers to a pair's timeline after the pacing.
	Extra func(pairID string) []eventlog.Observer
	OTel  *otelsetup.Serve           // nil draws nothing
	Built func(*orchestrator.Config) // a test hook, told of each config built
	// Approve is the policy of a spec without approve:, ApproveTimeout
	// each question's wait; Approvals holds the questions for the API.
	Approve        orchestrator.ApprovalPolicy
	ApproveTimeout time.Duration
	Approvals      *orchestrator.Approvals
	// Plugin, when set, is a plugin the operator adds to every pair
	// (plugin dev --serve: its active build).
	Plugin func() (spec.Plugin, bool)
	// MCP, when set, are the MCP servers every pair shares (serve --mcp).
	MCP *servers.Source
}

// Build is server.Config.Build: it decodes the request's spec, refuses
// what such a spec may not ask for with a *server.RequestError, and
// composes the rest.
func (b *Builder) Build(ctx context.Context, req server.BuildRequest) (server.Built, error) {
	file := "request.yaml"
	if req.ContentType == "application/json" {
		file = "request.json"
	}
	s, err := spec.Decode(file, req.Body)
	if err != nil {
		var se *spec.Error
		if errors.As(err, &se) {
			return server.Built{}, &server.RequestError{Field: se.Field, Line: se.Line, Message: se.Error(), Err: err}
		}
		return server.Built{}, &server.RequestError{Message: file + ": " + err.Error(), Err: err}
	}
	refuse := func(field, msg string) (server.Built, error) {
		line := lineOf(req.Body, field)
		where := file
		if line > 0 {
			where += ":" + strconv.Itoa(line)
		}
		return server.Built{}, &server.RequestError{Field: field, Line: line, Message: where + ": " + field + ": " + msg}
	}
	if s.Workspace != "" {
		return refuse("workspace", "a spec sent over HTTP may not name a workspace; the server gives each pair its own")
	}
	// A plugin is a native process the server would execute: a client must
	// never choose one. This server runs no plugin a spec names.
	if len(s.Plugins) > 0 {
		return refuse("plugins", "a spec sent over HTTP may not launch plugins; this server allows none")
	}
	if len(s.MCPServers) > 0 {
		return refuse("mcp_servers", "a spec sent over HTTP may not name MCP servers; the server's own (--mcp) serve every pair")
	}
	// The operator's plugin is not the client's to see: the spec is
	// shown as the client sent it.
	view, redact := shown(s, b.Getenv)
	if b.Plugin != nil {
		if p, ok := b.Plugin(); ok {
			s.Plugins = append(s.Plugins, p)
		}
	}
	// A spec without approve: gets the server's policy; the answers come
	// through the API (and the page), from whoever holds the token.
	appr := orchestrator.ApprovalConfig{Policy: b.Approve, Timeout: b.ApproveTimeout}
	if s.Approve != "" {
		pol, err := orchestrator.ParseApprovalPolicy(s.Approve)
		if err != nil {
			return refuse("approve", "want never, mutating, all, or tool names separated by commas")
		}
		appr.Policy = pol
	}
	scripted := true
	for i, w := range s.Workers {
		if w.Provider != spec.Scripted {
			scripted = false
		}
		if w.Provider == spec.OpenAI && !b.AllowOpenAI {
			return refuse("workers["+strconv.Itoa(i)+"].provider", "this server does not allow provider openai (start it with --allow-openai)")
		}
		if w.OpenAI.BaseURL != "" {
			return refuse("workers["+strconv.Itoa(i)+"].openai.base_url", "a spec sent over HTTP may not choose the server a worker connects to")
		}
	}
	// With the server's MCP servers, the plan is known only once Build
	// leases it, which checks the calls then.
	if err := compose.Check(s); err != nil && b.MCP == nil {
		return server.Built{}, &server.RequestError{Message: file + ": " + err.Error(), Err: err}
	}
	// The feed comes right after the store, so it is told only what the
	// store has made durable; pacing and test hooks come after it.
	timeline := []eventlog.Observer{req.Timeline}
	if scripted && b.Pace > 0 {
		timeline = append(timeline, pacer(b.Pace))
	}
	if b.Extra != nil {
		timeline = append(timeline, b.Extra(req.PairID)...)
	}
	p, err := compose.Build(compose.Options{
		Spec: s, Task: req.Task, Workspace: req.Workspace, PairID: req.PairID,
		Store: b.Store, Timeline: timeline, Getenv: b.Getenv,
		Approval: appr, Broker: b.Approvals, SharedMCP: b.MCP,
	})
	if err != nil {
		var ce *compose.ConfigError
		if errors.As(err, &ce) {
			return server.Built{}, &server.RequestError{Message: file + ": " + err.Error(), Err: err}
		}
		return server.Built{}, err
	}
	var parent trace.SpanContext
	if b.OTel != nil {
		parent = trace.SpanContextFromContext(ctx)
	}
	otelsetup.WriteRecord(ctx, io.Discard, b.Record, &p.Config, parent)
	if b.MCP != nil {
		// A failure loses only this record.
		_ = recordLeased(ctx, b.Store, req.PairID, p)
	}
	closeFn := p.Close
	if b.OTel != nil {
		drawn, err := b.OTel.Pair(ctx, &p.Config, otelsetup.ProviderNames(s))
		if err != nil {
			p.Close()
			return server.Built{}, err
		}
		closeFn = func() { p.Close(); drawn() }
	}
	if b.Built != nil {
		b.Built(&p.Config)
	}
	return server.Built{Config: &p.Config, Close: closeFn, Name: s.Name, Unpinned: p.Unpinned(), Spec: view, Redact: redact}, nil
}

// recordLeased writes the pair's MCP log: one plan.leased event naming
// the generations of the shared servers' plan it was built with, each
// marked pinned or not.
func recordLeased(ctx context.Context, st eventlog.Observer, pairID string, p *compose.Pair) error {
	gens, ok := p.MCPPlan(p.Plan.ID)
	if !ok {
		return nil
	}
	r, err := mcplog.NewRecorder(pairID, st, time.Now, 0)
	if err != nil {
		return err
	}
	r.OnEvent(servers.Event{Event: toolgen.Event{Kind: mcplog.KindPlanLeased, Plan: p.Plan.ID}, Generations: gens})
	return errors.Join(r.Flush(ctx), r.Close(ctx))
}

// lineOf finds the line of a top-level field in a YAML or JSON body, or 0.
func lineOf(body []byte, field string) int {
	key := field
	if i := strings.IndexAny(key, ".["); i >= 0 {
		key = key[:i]
	}
	for i, l := range bytes.Split(body, []byte("\n")) {
		t := strings.TrimSpace(string(l))
		if strings.HasPrefix(t, key+":") || strings.HasPrefix(t, `"`+key+`"`) {
			return i + 1
		}
	}
	return 0
}

// pacer is a required timeline observer that holds an all-scripted pair
// for d after each event, so that a person can watch it play. It gives up
// early when the pair's context ends. It holds nothing inside a model
// operation or a tool call (after their start and their progress), so
// that their spans and durations measure the operation, not the pacing.
type pacer time.Duration

func (p pacer) Observe(ctx context.Context, e eventlog.Event) error {
	switch e.Kind() {
	case event.KindModelStarted, event.KindModelTextDelta, event.KindToolStarted, event.KindToolProgress:
		return nil
	}
	t := time.NewTimer(time.Duration(p))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return nil
}
