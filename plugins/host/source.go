package host

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/toolgen"
)

// Defaults of SourceConfig.
const (
	DefaultDrainTimeout     = toolgen.DefaultDrainTimeout
	DefaultShutdownTimeout  = toolgen.DefaultShutdownTimeout
	DefaultMaxRestarts      = 3
	DefaultRestartWindow    = 10 * time.Minute
	DefaultMaxRetainedPlans = toolgen.DefaultMaxRetainedPlans
)

// ErrSourceClosed: the source was closed.
var ErrSourceClosed = errors.New("plugin source closed")

// SourceConfig configures a Source.
type SourceConfig struct {
	// PlanPrefix names the plans: PlanPrefix-1, PlanPrefix-2, ... never
	// reused. Required; the whole ID must be a valid plan ID.
	PlanPrefix string
	// Compiled are the tools of every plan beside the plugins'.
	Compiled []tool.Tool
	// Plugins are the configured plugins, one slot each, in this order.
	Plugins []Config
	// DrainTimeout bounds how long a retired generation that no lease
	// holds waits for its calls in flight before it is stopped by force.
	DrainTimeout time.Duration
	// ShutdownTimeout bounds Close: every generation drains within it,
	// then is stopped by force.
	ShutdownTimeout time.Duration
	// MaxRestarts bounds the fresh launches of a plugin whose process died
	// within RestartWindow; beyond it the plugin is failed until Reload.
	MaxRestarts   int
	RestartWindow time.Duration
	// MaxRetainedPlans bounds the plans kept for LeaseExact.
	MaxRetainedPlans int
	// Now reads the clock of the restart window; nil means time.Now.
	Now func() time.Time
	// OnEvent, when set, is told of every generation event, without the
	// source's lock held. It must return quickly.
	OnEvent func(Event)
}

// EventKind names a generation event.
type EventKind = toolgen.EventKind

const (
	EventActivated       = toolgen.EventActivated       // a new plan serves future leases
	EventCandidateFailed = toolgen.EventCandidateFailed // a candidate was refused; the active generation is unchanged
	EventDraining        = toolgen.EventDraining        // retired; drains once no lease holds it
	EventDrained         = toolgen.EventDrained         // stopped after its calls ended
	EventForced          = toolgen.EventForced          // stopped by force with calls in flight

	EventDead         EventKind = "generation.dead"      // its process died
	EventRestarted    EventKind = "generation.restarted" // a fresh launch replaced a dead one
	EventPluginFailed EventKind = "plugin.failed"        // restart limit reached: failed until Reload
)

// Event is one generation event.
type Event = toolgen.Event

// GenerationInfo describes one generation.
type GenerationInfo struct {
	ID   string // "<plugin name>-g<N>"
	Slot int
	Manifest
	PID    int
	Leases int
	State  string // active, draining, drained, forced, dead
}

// Source is a plan.Source over the compiled tools and one active
// generation per configured plugin (a generation is one verified process
// and its definitions). The generations, leases, drains and retained
// plans are a toolgen.Set's; the Source adds what is a plugin's: launching
// candidates (Reload), noticing a process die and restarting it within a
// bound.
type Source struct {
	cfg SourceConfig
	set *toolgen.Set
	wg  sync.WaitGroup // watchers and restarts

	mu    sync.Mutex
	slots []*slot
	gens  []*generation // every generation launched, oldest first
}

// generation is a plugin generation: the set's handle and its process.
type generation struct {
	g *toolgen.Gen
	p *Plugin
}

type slot struct {
	cfg      Config
	restarts []time.Time
	failed   string // why, once the restart limit was reached
}

var _ plan.Source = (*Source)(nil)

// NewSource launches every configured plugin and activates the first
// plan. On error nothing is left running.
func NewSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.PlanPrefix == "" {
		return nil, bound.Missing("source.plan_prefix")
	}
	if cfg.RestartWindow < 0 {
		return nil, bound.Malformedf("source", "durations must not be negative")
	}
	if cfg.RestartWindow == 0 {
		cfg.RestartWindow = DefaultRestartWindow
	}
	if cfg.MaxRestarts < 0 {
		return nil, bound.Malformedf("source", "counts must not be negative")
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	set, err := toolgen.New(toolgen.Config{PlanPrefix: cfg.PlanPrefix, Compiled: cfg.Compiled, Slots: len(cfg.Plugins),
		DrainTimeout: cfg.DrainTimeout, ShutdownTimeout: cfg.ShutdownTimeout,
		MaxRetainedPlans: cfg.MaxRetainedPlans, OnEvent: cfg.OnEvent})
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, set: set}
	var gens []*toolgen.Gen
	for i, pc := range cfg.Plugins {
		s.slots = append(s.slots, &slot{cfg: pc})
		g, err := s.launch(ctx, i, pc)
		if err != nil {
			s.abort()
			return nil, err
		}
		gens = append(gens, g)
	}
	evs, err := set.Activate(gens...)
	if err != nil {
		s.abort()
		return nil, err
	}
	set.Emit(evs)
	return s, nil
}

// abort stops what a failed NewSource launched; the set is closed first,
// so that no watcher restarts it.
func (s *Source) abort() {
	s.set.Abort()
	s.wg.Wait()
}

// launch starts one generation of slot i and watches its process.
func (s *Source) launch(ctx context.Context, i int, cfg Config) (*toolgen.Gen, error) {
	p, err := Launch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	g, err := s.set.Add(i, p.manifest.Name, p)
	if err != nil {
		p.Kill()
		return nil, err
	}
	s.mu.Lock()
	s.gens = append(s.gens, &generation{g: g, p: p})
	s.mu.Unlock()
	s.wg.Add(1)
	go s.watch(g)
	return g, nil
}

// Lease returns a lease on the current plan.
func (s *Source) Lease(ctx context.Context) (*plan.Lease, error) {
	l, err := s.set.Lease(ctx)
	return l, closedErr(err)
}

// LeaseExact returns a lease on the plan planID while the source retains
// it: a plan whose generations were stopped is no longer retained.
func (s *Source) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	l, err := s.set.LeaseExact(ctx, planID)
	return l, closedErr(err)
}

func closedErr(err error) error {
	if errors.Is(err, toolgen.ErrClosed) {
		return ErrSourceClosed
	}
	return err
}

// Current returns the identity of the plan future leases get.
func (s *Source) Current() GenerationPlan {
	return planInfo(s.set.Current())
}

// GenerationPlan is a plan and the generations it holds.
type GenerationPlan struct {
	Plan        plan.ID
	Generations []GenerationInfo
}

// Plan returns the generations of a retained plan: how a timeline's plan
// ID finds its generations.
func (s *Source) Plan(planID plan.ID) (GenerationPlan, bool) {
	pi, ok := s.set.Plan(planID)
	if !ok {
		return GenerationPlan{}, false
	}
	return planInfo(pi), true
}

func planInfo(pi toolgen.PlanInfo) GenerationPlan {
	gp := GenerationPlan{Plan: pi.Plan}
	for _, in := range pi.Generations {
		gp.Generations = append(gp.Generations, info(in))
	}
	return gp
}

// Generations describes every generation launched, oldest first.
func (s *Source) Generations() []GenerationInfo {
	all := s.set.Generations()
	out := make([]GenerationInfo, len(all))
	for i, in := range all {
		out[i] = info(in)
	}
	return out
}

// Failed returns why slot i's plugin is failed, or "".
func (s *Source) Failed(i int) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i < 0 || i >= len(s.slots) {
		return ""
	}
	return s.slots[i].failed
}

func info(in toolgen.Info) GenerationInfo {
	p := in.Unit.(*Plugin)
	return GenerationInfo{ID: in.ID, Slot: in.Slot, Manifest: p.Manifest(), PID: p.PID(), Leases: in.Leases, State: in.State}
}

// Close refuses new leases, drains every generation within
// ShutdownTimeout (waiting for the leases held), then stops what is left
// by force. No plugin process survives it.
func (s *Source) Close() error {
	err := s.set.Close()
	s.wg.Wait()
	return err
}
