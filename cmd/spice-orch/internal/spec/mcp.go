package spec

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// MaxMCPServers bounds a spec's mcp_servers list; MaxMCPTools bounds one
// server's tools entries; MaxMCPArgs bounds its args and env.
const (
	MaxMCPServers = 8
	MaxMCPTools   = 64
	MaxMCPArgs    = 32
)

// WorkspaceArg in an MCP server's args or dir stands for the pair's
// absolute workspace, so that a filesystem server is confined to it.
const WorkspaceArg = "{workspace}"

var (
	mcpFields     = []string{"name", "path", "sha256", "entry", "lock", "args", "env", "dir", "url", "tools", "bounds"}
	mcpPinFields  = []string{"path", "sha256"}
	mcpToolFields = []string{"digest", "effect", "replay"}
	mcpBounds     = []string{"startup_timeout", "list_timeout", "call_timeout", "max_message_bytes", "max_result_bytes", "max_tools"}
)

// MCPServer is one MCP server whose tools join the pair's plan: a stdio
// server pinned by path and SHA-256 (and, when interpreted, its entry and
// lock file), or a streamable-HTTP server by URL, which is unpinned.
type MCPServer struct {
	Name   string
	Path   string
	SHA256 string
	Entry  *FilePin
	Lock   *FilePin
	Args   []string
	Env    []string
	Dir    string
	URL    string
	Tools  map[string]MCPTool
	Bounds MCPBounds
}

// FilePin is a file named by absolute path and pinned by SHA-256.
type FilePin struct{ Path, SHA256 string }

// MCPTool is the operator's word on one MCP tool: a pinned definition
// digest, and the declared effect and replay safety.
type MCPTool struct {
	Digest string
	Effect string // "", read_only, mutating
	Replay string // "", safe, idempotent, unsafe
}

// MCPBounds are the optional bounds of an MCP server (zero: defaults).
type MCPBounds struct {
	StartupTimeout, ListTimeout, CallTimeout  time.Duration
	MaxMessageBytes, MaxResultBytes, MaxTools int
}

func (d *decoder) mcpServers(n *yaml.Node) ([]MCPServer, error) {
	items, err := d.list(n, "mcp_servers")
	if err != nil {
		return nil, err
	}
	if len(items) > MaxMCPServers {
		return nil, d.fail(n, "mcp_servers", "at most "+strconv.Itoa(MaxMCPServers)+" servers")
	}
	out := make([]MCPServer, 0, len(items))
	names := map[string]bool{}
	for i, item := range items {
		s, err := d.mcpServer(item, "mcp_servers["+strconv.Itoa(i)+"]")
		if err != nil {
			return nil, err
		}
		if names[s.Name] {
			return nil, d.fail(item, "mcp_servers["+strconv.Itoa(i)+"].name", "name given to two servers")
		}
		names[s.Name] = true
		out = append(out, s)
	}
	return out, nil
}

func (d *decoder) absPath(o *object, name string, required bool) (string, error) {
	p, err := d.str(o, name, required, 4096)
	if err != nil || p == "" {
		return p, err
	}
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return "", d.fail(o.line(name), join(o.path, name), "must be a clean absolute path (no PATH lookup, no relative paths)")
	}
	return p, nil
}

func (d *decoder) digest(o *object, name string, required bool) (string, error) {
	s, err := d.str(o, name, required, 64)
	if err != nil || s == "" {
		return s, err
	}
	if len(s) != 64 || strings.Trim(s, "0123456789abcdef") != "" {
		return "", d.fail(o.line(name), join(o.path, name), "must be 64 lower-case hex characters")
	}
	return s, nil
}

func (d *decoder) filePin(n *yaml.Node, path string) (*FilePin, error) {
	o, err := d.object(n, path, mcpPinFields...)
	if err != nil {
		return nil, err
	}
	var p FilePin
	if p.Path, err = d.absPath(o, "path", true); err != nil {
		return nil, err
	}
	if p.SHA256, err = d.digest(o, "sha256", true); err != nil {
		return nil, err
	}
	return &p, nil
}

func (d *decoder) strings(o *object, name string) ([]string, error) {
	v, ok := o.values[name]
	if !ok {
		return nil, nil
	}
	items, err := d.list(v, join(o.path, name))
	if err != nil {
		return nil, err
	}
	if len(items) > MaxMCPArgs {
		return nil, d.fail(v, join(o.path, name), "at most "+strconv.Itoa(MaxMCPArgs)+" entries")
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		field := join(o.path, name) + "[" + strconv.Itoa(i) + "]"
		if it.Kind != yaml.ScalarNode || it.ShortTag() != "!!str" {
			return nil, d.fail(it, field, "want a string, got "+describe(it))
		}
		if err := bound.OptionalText(field, it.Value, 4096); err != nil {
			return nil, d.bound(it, field, err)
		}
		out = append(out, it.Value)
	}
	return out, nil
}

func (d *decoder) mcpServer(n *yaml.Node, path string) (MCPServer, error) {
	var s MCPServer
	o, err := d.object(n, path, mcpFields...)
	if err != nil {
		return s, err
	}
	if s.Name, err = d.str(o, "name", true, bound.MaxNameBytes); err != nil {
		return s, err
	}
	if err := bound.Name(join(path, "name"), s.Name); err != nil {
		return s, d.bound(o.line("name"), "", err)
	}
	if s.URL, err = d.str(o, "url", false, 2048); err != nil {
		return s, err
	}
	if s.URL != "" {
		for _, f := range []string{"path", "sha256", "entry", "lock", "args", "env", "dir"} {
			if o.has(f) {
				return s, d.fail(o.line(f), join(path, f), "an HTTP server (url) is not launched: remove "+f)
			}
		}
	} else {
		if s.Path, err = d.absPath(o, "path", true); err != nil {
			return s, err
		}
		if s.SHA256, err = d.digest(o, "sha256", true); err != nil {
			return s, err
		}
		if v, ok := o.values["entry"]; ok {
			if s.Entry, err = d.filePin(v, join(path, "entry")); err != nil {
				return s, err
			}
		}
		if v, ok := o.values["lock"]; ok {
			if s.Entry == nil {
				return s, d.fail(v, join(path, "lock"), "a lock file pins an entry file's dependencies: give entry too")
			}
			if s.Lock, err = d.filePin(v, join(path, "lock")); err != nil {
				return s, err
			}
		}
		if s.Args, err = d.strings(o, "args"); err != nil {
			return s, err
		}
		if s.Env, err = d.strings(o, "env"); err != nil {
			return s, err
		}
		for i, kv := range s.Env {
			if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
				return s, d.fail(o.line("env"), join(path, "env")+"["+strconv.Itoa(i)+"]", "want KEY=value")
			}
		}
		if s.Dir, err = d.str(o, "dir", false, 4096); err != nil {
			return s, err
		}
		if s.Dir != "" && s.Dir != WorkspaceArg && !filepath.IsAbs(s.Dir) {
			return s, d.fail(o.line("dir"), join(path, "dir"), "must be absolute or "+WorkspaceArg)
		}
	}
	if v, ok := o.values["tools"]; ok {
		if s.Tools, err = d.mcpTools(v, join(path, "tools")); err != nil {
			return s, err
		}
	}
	if v, ok := o.values["bounds"]; ok {
		if s.Bounds, err = d.mcpBounds(v, join(path, "bounds")); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (d *decoder) mcpTools(n *yaml.Node, path string) (map[string]MCPTool, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, path, "want a mapping of tool names, got "+describe(n))
	}
	if len(n.Content)/2 > MaxMCPTools {
		return nil, d.fail(n, path, "at most "+strconv.Itoa(MaxMCPTools)+" tools")
	}
	out := make(map[string]MCPTool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, d.fail(k, path, "tool names must be strings")
		}
		field := join(path, k.Value)
		if err := bound.Name(field, k.Value); err != nil {
			return nil, d.bound(k, "", err)
		}
		if _, dup := out[k.Value]; dup {
			return nil, d.fail(k, field, "tool given twice")
		}
		o, err := d.object(v, field, mcpToolFields...)
		if err != nil {
			return nil, err
		}
		var t MCPTool
		if t.Digest, err = d.digest(o, "digest", false); err != nil {
			return nil, err
		}
		if t.Effect, err = d.enum(o, "effect", false, "read_only", "mutating"); err != nil {
			return nil, err
		}
		if t.Replay, err = d.enum(o, "replay", false, "safe", "idempotent", "unsafe"); err != nil {
			return nil, err
		}
		if (t.Effect == "") != (t.Replay == "") {
			return nil, d.fail(v, field, "declare effect and replay together")
		}
		out[k.Value] = t
	}
	return out, nil
}

func (d *decoder) mcpBounds(n *yaml.Node, path string) (MCPBounds, error) {
	var b MCPBounds
	o, err := d.object(n, path, mcpBounds...)
	if err != nil {
		return b, err
	}
	durs := []*time.Duration{&b.StartupTimeout, &b.ListTimeout, &b.CallTimeout}
	for i, dst := range durs {
		if *dst, err = d.duration(o, mcpBounds[i], MaxTimeout); err != nil {
			return b, err
		}
	}
	v, err := d.integer(o, "max_message_bytes", 1024, MaxPluginBytes)
	if err != nil {
		return b, err
	}
	b.MaxMessageBytes = int(v)
	if v, err = d.integer(o, "max_result_bytes", 1, int64(bound.MaxToolResultBytes)); err != nil {
		return b, err
	}
	b.MaxResultBytes = int(v)
	if v, err = d.integer(o, "max_tools", 1, 1024); err != nil {
		return b, err
	}
	b.MaxTools = int(v)
	return b, nil
}
