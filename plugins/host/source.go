package host

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Defaults of SourceConfig.
const (
	DefaultDrainTimeout     = 30 * time.Second
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultMaxRestarts      = 3
	DefaultRestartWindow    = 10 * time.Minute
	DefaultMaxRetainedPlans = 16
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
type EventKind string

const (
	EventActivated       EventKind = "plan.activated"       // a new plan serves future leases
	EventCandidateFailed EventKind = "candidate.failed"     // a candidate was refused; the active generation is unchanged
	EventDraining        EventKind = "generation.draining"  // retired; drains once no lease holds it
	EventDrained         EventKind = "generation.drained"   // stopped after its calls ended
	EventForced          EventKind = "generation.forced"    // stopped by force with calls in flight
	EventDead            EventKind = "generation.dead"      // its process died
	EventRestarted       EventKind = "generation.restarted" // a fresh launch replaced a dead one
	EventPluginFailed    EventKind = "plugin.failed"        // restart limit reached: failed until Reload
)

// Event is one generation event.
type Event struct {
	Kind       EventKind
	Slot       int
	Generation string  // the generation concerned, if any
	Plan       plan.ID // for EventActivated
	InFlight   int     // calls in flight, for EventForced
	Reason     string
}

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
// and its definitions). Activation changes only future leases; a lease
// keeps its plan's generations until it is released; Release is a quick
// reference decrement, and draining is the source's own work.
type Source struct {
	cfg SourceConfig
	wg  sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	seq     uint64
	slots   []*slot
	current *planEntry
	plans   map[plan.ID]*planEntry
	order   []*planEntry // retained, oldest first
	gens    []*generation
}

type slot struct {
	cfg      Config
	active   *generation
	n        int
	restarts []time.Time
	failed   string // why, once the restart limit was reached
}

type generation struct {
	id       string
	slot     int
	p        *Plugin
	leases   int
	retired  bool
	state    string
	unleased chan struct{} // closed once retired and no lease holds it
	gone     bool          // unleased is closed: no plan holding g is leased again
	done     chan struct{} // closed once stopped
	// forced is set when Close stops g by force, with the calls then in
	// flight: its drain reports it forced.
	forced         bool
	forcedInFlight int
}

type planEntry struct {
	plan    plan.Plan
	gens    []*generation
	leases  int
	release func() error
}

var _ plan.Source = (*Source)(nil)

// NewSource launches every configured plugin and activates the first
// plan. On error nothing is left running.
func NewSource(ctx context.Context, cfg SourceConfig) (*Source, error) {
	if cfg.PlanPrefix == "" {
		return nil, bound.Missing("source.plan_prefix")
	}
	durs := []*time.Duration{&cfg.DrainTimeout, &cfg.ShutdownTimeout, &cfg.RestartWindow}
	defs := []time.Duration{DefaultDrainTimeout, DefaultShutdownTimeout, DefaultRestartWindow}
	for i, d := range durs {
		if *d < 0 {
			return nil, bound.Malformedf("source", "durations must not be negative")
		}
		if *d == 0 {
			*d = defs[i]
		}
	}
	if cfg.MaxRestarts < 0 || cfg.MaxRetainedPlans < 0 {
		return nil, bound.Malformedf("source", "counts must not be negative")
	}
	if cfg.MaxRestarts == 0 {
		cfg.MaxRestarts = DefaultMaxRestarts
	}
	if cfg.MaxRetainedPlans == 0 {
		cfg.MaxRetainedPlans = DefaultMaxRetainedPlans
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Source{cfg: cfg, plans: make(map[plan.ID]*planEntry)}
	for i, pc := range cfg.Plugins {
		s.slots = append(s.slots, &slot{cfg: pc})
		g, err := s.launch(ctx, i, pc)
		if err != nil {
			s.killAll()
			return nil, err
		}
		s.slots[i].active = g
	}
	s.mu.Lock()
	evs, err := s.activate()
	s.mu.Unlock()
	if err != nil {
		s.killAll()
		return nil, err
	}
	s.emit(evs)
	return s, nil
}

// killAll stops what a failed NewSource launched; closed first, so that
// no watcher restarts it.
func (s *Source) killAll() {
	s.mu.Lock()
	s.closed = true
	gens := append([]*generation(nil), s.gens...)
	s.mu.Unlock()
	for _, g := range gens {
		g.p.Kill()
		close(g.done)
	}
	s.wg.Wait()
}

// launch starts one generation of slot i and watches its process.
func (s *Source) launch(ctx context.Context, i int, cfg Config) (*generation, error) {
	p, err := Launch(ctx, cfg)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	sl := s.slots[i]
	sl.n++
	g := &generation{id: p.manifest.Name + "-g" + strconv.Itoa(sl.n), slot: i, p: p, state: "active",
		unleased: make(chan struct{}), done: make(chan struct{})}
	s.gens = append(s.gens, g)
	s.mu.Unlock()
	s.wg.Add(1)
	go s.watch(g)
	return g, nil
}

// activate builds the plan of the active generations under a new ID and
// makes it current, retiring the generations it no longer holds. Called
// with s.mu held; on error nothing changes.
func (s *Source) activate() ([]Event, error) {
	tools := append([]tool.Tool(nil), s.cfg.Compiled...)
	var gens []*generation
	for _, sl := range s.slots {
		if sl.active != nil {
			gens = append(gens, sl.active)
			tools = append(tools, sl.active.p.Tools()...)
		}
	}
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	if err != nil {
		return nil, err
	}
	s.seq++
	pl, err := plan.New(plan.ID(s.cfg.PlanPrefix+"-"+strconv.FormatUint(s.seq, 10)), d)
	if err != nil {
		return nil, err
	}
	e := &planEntry{plan: pl, gens: gens}
	e.release = func() error { s.release(e); return nil }
	old := s.current
	s.current = e
	s.plans[pl.ID()] = e
	s.order = append(s.order, e)
	evs := []Event{{Kind: EventActivated, Plan: pl.ID()}}
	if old != nil {
		for _, g := range old.gens {
			if !contains(gens, g) {
				evs = append(evs, s.retire(g))
			}
		}
	}
	s.evict()
	return evs, nil
}

func contains(gs []*generation, g *generation) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// retire marks g as no longer current and starts its drain. With s.mu.
func (s *Source) retire(g *generation) Event {
	g.retired = true
	if g.state == "active" {
		g.state = "draining"
	}
	if g.leases == 0 {
		g.markUnleased()
	}
	s.wg.Add(1)
	go s.drain(g)
	return Event{Kind: EventDraining, Slot: g.slot, Generation: g.id}
}

// evict drops the oldest unleased plans beyond the retention bound.
func (s *Source) evict() {
	for len(s.order) > s.cfg.MaxRetainedPlans {
		i := -1
		for j, e := range s.order {
			if e != s.current && e.leases == 0 {
				i = j
				break
			}
		}
		if i < 0 {
			return
		}
		delete(s.plans, s.order[i].plan.ID())
		s.order = append(s.order[:i], s.order[i+1:]...)
	}
}

// Lease returns a lease on the current plan.
func (s *Source) Lease(ctx context.Context) (*plan.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrSourceClosed
	}
	e := s.current
	s.take(e)
	s.mu.Unlock()
	return s.newLease(e)
}

// LeaseExact returns a lease on the plan planID while the source retains
// it: a plan whose generations were stopped is no longer retained.
func (s *Source) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	e, ok := s.plans[planID]
	for _, g := range e.gensOrNil() {
		ok = ok && !g.gone
	}
	if ok && !s.closed {
		s.take(e)
	}
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return nil, ErrSourceClosed
	}
	if !ok {
		return nil, &plan.IDError{ID: planID, Err: plan.ErrUnknownPlan}
	}
	return s.newLease(e)
}

func (s *Source) take(e *planEntry) {
	e.leases++
	for _, g := range e.gens {
		g.leases++
	}
}

func (s *Source) newLease(e *planEntry) (*plan.Lease, error) {
	l, err := plan.NewLease(e.plan, e.release, plan.LeaseConfig{Inline: true})
	if err != nil {
		s.release(e)
		return nil, err
	}
	return l, nil
}

// release is a lease's release: a reference decrement that never blocks
// on a drain (K14).
func (s *Source) release(e *planEntry) {
	s.mu.Lock()
	e.leases--
	for _, g := range e.gens {
		g.leases--
		if g.retired && g.leases == 0 {
			g.markUnleased()
		}
	}
	s.mu.Unlock()
}

func (s *Source) emit(evs []Event) {
	if s.cfg.OnEvent == nil {
		return
	}
	for _, e := range evs {
		s.cfg.OnEvent(e)
	}
}

func (e *planEntry) gensOrNil() []*generation {
	if e == nil {
		return nil
	}
	return e.gens
}

func (g *generation) markUnleased() {
	if !g.gone {
		g.gone = true
		close(g.unleased)
	}
}
