package spec

import (
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// MaxPlugins bounds a spec's plugins list.
const MaxPlugins = 8

// MaxPluginBytes bounds a plugin's message bounds in a spec.
const MaxPluginBytes = 64 << 20

// MaxPluginFiles bounds the files entries of a plugin.
const MaxPluginFiles = 64

var (
	pluginFields = []string{"path", "sha256", "name", "root", "files", "bounds"}
	pluginBounds = []string{"startup_timeout", "call_timeout", "cancel_grace", "shutdown_grace",
		"max_request_bytes", "max_response_bytes", "max_concurrent_calls"}
)

// Plugin is one runtime tool plugin of a pair: an absolute executable path
// pinned by its SHA-256, and optional bounds (zero: the host's defaults).
// An interpreted plugin also names the files it loads (Root and Files),
// which the pin then covers with the executable.
type Plugin struct {
	Path   string
	SHA256 string
	// Name, when set, must be the plugin's name in its manifest.
	Name string
	// Root is a clean absolute directory; Files are clean relative paths
	// under it, of files or directories (the plugin's sources and its
	// dependency lock file).
	Root   string
	Files  []string
	Bounds PluginBounds
	// Line and PinLine are the lines of Path and SHA256 in the spec
	// file, for a caller that checks the file they name.
	Line, PinLine int
}

// PluginBounds are the optional bounds of a plugin.
type PluginBounds struct {
	StartupTimeout, CallTimeout, CancelGrace, ShutdownGrace time.Duration
	MaxRequestBytes, MaxResponseBytes, MaxConcurrentCalls   int
}

func (d *decoder) plugins(n *yaml.Node) ([]Plugin, error) {
	items, err := d.list(n, "plugins")
	if err != nil {
		return nil, err
	}
	if len(items) > MaxPlugins {
		return nil, d.fail(n, "plugins", "at most "+strconv.Itoa(MaxPlugins)+" plugins")
	}
	out := make([]Plugin, 0, len(items))
	for i, item := range items {
		path := "plugins[" + strconv.Itoa(i) + "]"
		o, err := d.object(item, path, pluginFields...)
		if err != nil {
			return nil, err
		}
		var p Plugin
		if p.Path, err = d.str(o, "path", true, 4096); err != nil {
			return nil, err
		}
		if !filepath.IsAbs(p.Path) || filepath.Clean(p.Path) != p.Path {
			return nil, d.fail(o.line("path"), join(path, "path"),
				"must be a clean absolute path (no PATH lookup, no relative paths)")
		}
		if p.SHA256, err = d.str(o, "sha256", true, 64); err != nil {
			return nil, err
		}
		p.Line, p.PinLine = o.line("path").Line, o.line("sha256").Line
		if len(p.SHA256) != 64 || strings.Trim(p.SHA256, "0123456789abcdef") != "" {
			return nil, d.fail(o.line("sha256"), join(path, "sha256"),
				"must be 64 lower-case hex characters (spice-orch plugin digest PATH prints it)")
		}
		if p.Name, err = d.str(o, "name", false, bound.MaxNameBytes); err != nil {
			return nil, err
		}
		if p.Name != "" {
			if err := bound.Name(join(path, "name"), p.Name); err != nil {
				return nil, d.bound(o.line("name"), "", err)
			}
		}
		if p.Root, p.Files, err = d.pluginFiles(o, path); err != nil {
			return nil, err
		}
		if v, ok := o.values["bounds"]; ok {
			if p.Bounds, err = d.pluginBounds(v, join(path, "bounds")); err != nil {
				return nil, err
			}
		}
		out = append(out, p)
	}
	return out, nil
}

func (d *decoder) pluginBounds(n *yaml.Node, path string) (PluginBounds, error) {
	var b PluginBounds
	o, err := d.object(n, path, pluginBounds...)
	if err != nil {
		return b, err
	}
	// In the order of pluginBounds, so the first error is deterministic.
	durs := []*time.Duration{&b.StartupTimeout, &b.CallTimeout, &b.CancelGrace, &b.ShutdownGrace}
	for i, dst := range durs {
		if *dst, err = d.duration(o, pluginBounds[i], MaxTimeout); err != nil {
			return b, err
		}
	}
	for i, dst := range []*int{&b.MaxRequestBytes, &b.MaxResponseBytes} {
		v, err := d.integer(o, pluginBounds[len(durs)+i], 1024, MaxPluginBytes)
		if err != nil {
			return b, err
		}
		*dst = int(v)
	}
	v, err := d.integer(o, "max_concurrent_calls", 1, 4096)
	b.MaxConcurrentCalls = int(v)
	return b, err
}

// pluginFiles reads root and files: both or neither.
func (d *decoder) pluginFiles(o *object, path string) (string, []string, error) {
	root, err := d.str(o, "root", false, 4096)
	if err != nil {
		return "", nil, err
	}
	v, ok := o.values["files"]
	if root == "" && !ok {
		return "", nil, nil
	}
	if root == "" || !ok {
		return "", nil, d.fail(o.node, path, "root and files go together: the files an interpreted plugin loads, under root")
	}
	if !filepath.IsAbs(root) || filepath.Clean(root) != root {
		return "", nil, d.fail(o.line("root"), join(path, "root"), "must be a clean absolute path")
	}
	items, err := d.list(v, join(path, "files"))
	if err != nil {
		return "", nil, err
	}
	if len(items) == 0 || len(items) > MaxPluginFiles {
		return "", nil, d.fail(v, join(path, "files"), "1 to "+strconv.Itoa(MaxPluginFiles)+" paths")
	}
	files := make([]string, len(items))
	for i, it := range items {
		field := join(path, "files["+strconv.Itoa(i)+"]")
		if it.Kind != yaml.ScalarNode || it.ShortTag() != "!!str" {
			return "", nil, d.fail(it, field, "want a string, got "+describe(it))
		}
		f := it.Value
		if err := bound.Text(field, f, 1024); err != nil {
			return "", nil, d.bound(it, field, err)
		}
		if filepath.IsAbs(f) || filepath.Clean(f) != f || f == "." || f == ".." || strings.HasPrefix(f, "../") {
			return "", nil, d.fail(it, field, "must be a clean relative path inside root")
		}
		files[i] = f
	}
	return root, files, nil
}
