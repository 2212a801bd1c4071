package compose

import (
	"context"
	"errors"
	"path/filepath"
	"slices"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
	"github.com/spice-orch/spice-orch/mcp/servers"
	"github.com/spice-orch/spice-orch/toolgen"
)

var effects = map[string]tool.Effect{"read_only": tool.ReadOnly, "mutating": tool.Mutating}
var replays = map[string]tool.Replay{"safe": tool.Safe, "idempotent": tool.Idempotent, "unsafe": tool.Unsafe}

// MCPConfig is the client configuration of a spec's MCP server entry;
// WorkspaceArg in its args or dir becomes the absolute workspace.
func MCPConfig(s spec.MCPServer, workspace string) (client.Config, error) {
	ws := workspace
	if ws != "" {
		abs, err := filepath.Abs(ws)
		if err != nil {
			return client.Config{}, err
		}
		ws = abs
	}
	sub := func(v string) string {
		if v == spec.WorkspaceArg {
			return ws
		}
		return v
	}
	c := client.Config{
		Name: s.Name, Path: s.Path, SHA256: s.SHA256, Env: s.Env, Dir: sub(s.Dir), URL: s.URL,
		StartupTimeout: s.Bounds.StartupTimeout, ListTimeout: s.Bounds.ListTimeout, CallTimeout: s.Bounds.CallTimeout,
		MaxMessageBytes: s.Bounds.MaxMessageBytes, MaxResultBytes: s.Bounds.MaxResultBytes, MaxTools: s.Bounds.MaxTools,
	}
	for _, a := range s.Args {
		c.Args = append(c.Args, sub(a))
	}
	if s.Entry != nil {
		c.Entry = &client.FilePin{Path: s.Entry.Path, SHA256: s.Entry.SHA256}
	}
	if s.Lock != nil {
		c.Lock = &client.FilePin{Path: s.Lock.Path, SHA256: s.Lock.SHA256}
	}
	if len(s.Tools) > 0 {
		c.Tools = make(map[string]client.ToolConfig, len(s.Tools))
		for name, t := range s.Tools {
			c.Tools[name] = client.ToolConfig{Digest: t.Digest, Effect: effects[t.Effect], Replay: replays[t.Replay]}
		}
	}
	return c, nil
}

// connectMCP connects every MCP server of the spec as the generations of
// one source (plans prefix-1, prefix-2, ...). A server that cannot be
// verified is a *ConfigError: the spec's pin, path or URL is what the
// user fixes. On error nothing is left running.
func connectMCP(ctx context.Context, workspace, prefix string, ss []spec.MCPServer, onEvent func(servers.Event)) (*servers.Source, error) {
	cfg := servers.Config{PlanPrefix: prefix, OnEvent: onEvent}
	for _, s := range ss {
		c, err := MCPConfig(s, workspace)
		if err != nil {
			return nil, &ConfigError{err}
		}
		cfg.Servers = append(cfg.Servers, c)
	}
	src, err := servers.New(ctx, cfg)
	if err != nil {
		return nil, &ConfigError{err}
	}
	return src, nil
}

// SharedMCP connects the MCP servers of ss once for every pair a server
// builds (Options.SharedMCP). Their args and dir may not name the
// workspace: pairs have one each. approve, when set, decides on each
// candidate whose tool definitions changed (servers.Config.Approve).
func SharedMCP(ctx context.Context, ss []spec.MCPServer, cfg servers.Config) (*servers.Source, error) {
	for _, s := range ss {
		if s.Dir == spec.WorkspaceArg || slices.Contains(s.Args, spec.WorkspaceArg) {
			return nil, &ConfigError{errors.New("mcp server " + s.Name + ": " + spec.WorkspaceArg + " names one pair's workspace; servers shared by pairs have none")}
		}
	}
	for _, s := range ss {
		c, err := MCPConfig(s, "")
		if err != nil {
			return nil, &ConfigError{err}
		}
		cfg.Servers = append(cfg.Servers, c)
	}
	src, err := servers.New(ctx, cfg)
	if err != nil {
		return nil, &ConfigError{err}
	}
	return src, nil
}

// joinPlan joins the compiled tools and sources into the pair's plan
// source, and leases it once for the first plan's identity and tools.
func joinPlan(prefix string, compiled []tool.Tool, sources []plan.Source) (*toolgen.Joined, plan.Identity, map[string]tool.Definition, error) {
	j, err := toolgen.Join(toolgen.JoinConfig{PlanPrefix: prefix, Compiled: compiled, Sources: sources})
	if err != nil {
		return nil, plan.Identity{}, nil, err
	}
	l, err := j.Lease(context.Background())
	if err != nil {
		// Two sources that name one tool are the spec's to fix.
		return nil, plan.Identity{}, nil, &ConfigError{err}
	}
	pl := l.Plan()
	_ = l.Release(context.Background())
	return j, pl.Identity(), definitionsOf(pl), nil
}

// Unpinned are the tools of the pair's first plan whose server's code is
// not pinned (a streamable-HTTP MCP server's), sorted.
func (p *Pair) Unpinned() []string {
	gs, _ := p.MCPPlan(p.Plan.ID)
	var out []string
	for _, g := range gs {
		if g.Pinned {
			continue
		}
		for _, t := range g.Tools {
			out = append(out, t.Name)
		}
	}
	slices.Sort(out)
	return out
}

// MCPPlan describes the MCP generations that the pair's plan planID (the
// plan ID of a run.started) holds; false without MCP servers or for a plan
// no longer retained.
func (p *Pair) MCPPlan(planID plan.ID) ([]servers.Generation, bool) {
	if p.joined == nil {
		return nil, false
	}
	inner, ok := p.joined.Inner(planID)
	if !ok {
		return nil, false
	}
	if p.plugins != nil {
		inner = inner[1:]
	}
	var out []servers.Generation
	for i, m := range p.mcp {
		gs, ok := m.Plan(inner[i])
		if !ok {
			return nil, false
		}
		out = append(out, gs...)
	}
	return out, true
}
