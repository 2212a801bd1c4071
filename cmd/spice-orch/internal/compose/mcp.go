package compose

import (
	"context"
	"path/filepath"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/mcp/client"
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

// connectMCP connects every MCP server of the spec and returns their tools.
// A server that cannot be verified is a *ConfigError: the spec's pin, path
// or URL is what the user fixes. On error nothing is left running.
func connectMCP(ctx context.Context, workspace string, ss []spec.MCPServer) ([]*client.Server, []tool.Tool, error) {
	var servers []*client.Server
	var tools []tool.Tool
	closeAll := func() {
		for _, s := range servers {
			_ = s.Close()
		}
	}
	for _, s := range ss {
		cfg, err := MCPConfig(s, workspace)
		if err != nil {
			closeAll()
			return nil, nil, &ConfigError{err}
		}
		srv, err := client.Connect(ctx, cfg)
		if err != nil {
			closeAll()
			return nil, nil, &ConfigError{err}
		}
		servers = append(servers, srv)
		tools = append(tools, srv.Tools()...)
	}
	return servers, tools, nil
}

// MCP describes the tools of the pair's MCP servers: their digests,
// whether each server is pinned, and where each effect came from.
func (p *Pair) MCP() []client.Info {
	var out []client.Info
	for _, s := range p.mcp {
		out = append(out, s.Info()...)
	}
	return out
}
