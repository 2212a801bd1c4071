package compose

import (
	"context"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/host"
	"github.com/spice-orch/spice-orch/tools"
)

// PluginConfig is the host configuration of a spec's plugin entry.
func PluginConfig(p spec.Plugin) host.Config {
	b := p.Bounds
	return host.Config{
		Path: p.Path, SHA256: p.SHA256, Name: p.Name, Root: p.Root, Files: p.Files,
		StartupTimeout: b.StartupTimeout, CallTimeout: b.CallTimeout,
		CancelGrace: b.CancelGrace, ShutdownGrace: b.ShutdownGrace,
		MaxRequestBytes: b.MaxRequestBytes, MaxResponseBytes: b.MaxResponseBytes,
		MaxConcurrentCalls: b.MaxConcurrentCalls,
	}
}

// pluginPlan makes the pair's plan source when the spec lists plugins: a
// host.Source over the compiled tools and one verified generation of each
// plugin (plans planID-1, planID-2, ...). A plugin that cannot be verified
// is a *ConfigError: the spec's pin or path is what the user fixes.
func pluginPlan(tc tools.Config, planID string, ps []spec.Plugin, onEvent func(host.Event)) (*host.Source, plan.Identity, map[string]tool.Definition, error) {
	compiled, err := tools.New(tc)
	if err != nil {
		return nil, plan.Identity{}, nil, &ConfigError{err}
	}
	cfg := host.SourceConfig{PlanPrefix: planID, Compiled: compiled, OnEvent: onEvent}
	for _, p := range ps {
		cfg.Plugins = append(cfg.Plugins, PluginConfig(p))
	}
	src, err := host.NewSource(context.Background(), cfg)
	if err != nil {
		return nil, plan.Identity{}, nil, &ConfigError{err}
	}
	l, err := src.Lease(context.Background())
	if err != nil {
		_ = src.Close()
		return nil, plan.Identity{}, nil, err
	}
	pl := l.Plan()
	_ = l.Release(context.Background())
	return src, pl.Identity(), definitionsOf(pl), nil
}

// Generations describes the plugin generations of the pair's plan; none
// without plugins.
func (p *Pair) Generations() []host.GenerationInfo {
	if p.plugins == nil {
		return nil
	}
	return p.plugins.Current().Generations
}

// PluginPlan returns the plugin generations of one of the pair's plans
// (the plan ID of a run.started); false without plugins or for a plan the
// host no longer retains.
func (p *Pair) PluginPlan(planID plan.ID) (host.GenerationPlan, bool) {
	if p.plugins == nil {
		return host.GenerationPlan{}, false
	}
	if p.joined != nil {
		inner, ok := p.joined.Inner(planID)
		if !ok {
			return host.GenerationPlan{}, false
		}
		planID = inner[0]
	}
	return p.plugins.Plan(planID)
}
