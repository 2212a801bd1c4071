package compose

import (
	"context"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/host"
)

// PluginConfig is the host configuration of a spec's plugin entry.
func PluginConfig(p spec.Plugin) host.Config {
	b := p.Bounds
	return host.Config{
		Path: p.Path, SHA256: p.SHA256, Name: p.Name,
		StartupTimeout: b.StartupTimeout, CallTimeout: b.CallTimeout,
		CancelGrace: b.CancelGrace, ShutdownGrace: b.ShutdownGrace,
		MaxRequestBytes: b.MaxRequestBytes, MaxResponseBytes: b.MaxResponseBytes,
		MaxConcurrentCalls: b.MaxConcurrentCalls,
	}
}

// launchPlugins launches and verifies the spec's plugins and returns their
// tools and a function that stops them all. On error none is left running.
// A plugin that cannot be verified is a *ConfigError: the spec's pin or
// path is what the user fixes.
func launchPlugins(ps []spec.Plugin) ([]tool.Tool, []*host.Plugin, error) {
	var tools []tool.Tool
	var launched []*host.Plugin
	for _, ps := range ps {
		p, err := host.Launch(context.Background(), PluginConfig(ps))
		if err != nil {
			closePlugins(launched)
			return nil, nil, &ConfigError{err}
		}
		launched = append(launched, p)
		tools = append(tools, p.Tools()...)
	}
	return tools, launched, nil
}

func closePlugins(ps []*host.Plugin) {
	for _, p := range ps {
		_ = p.Close()
	}
}
