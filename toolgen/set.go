package toolgen

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

// Defaults of Config.
const (
	DefaultDrainTimeout     = 30 * time.Second
	DefaultShutdownTimeout  = 30 * time.Second
	DefaultMaxRetainedPlans = 16
)

var (
	// ErrClosed: the set was closed.
	ErrClosed = errors.New("toolgen: closed")
	// ErrStale: the generation a candidate was to replace is no longer
	// the active one of its slot.
	ErrStale = errors.New("toolgen: the replaced generation is no longer active")
)

// Unit is what a generation serves: verified tools and the means to drain
// and stop them. Its methods must be safe for concurrent use.
type Unit interface {
	// Tools are the unit's tools, fixed for its lifetime.
	Tools() []tool.Tool
	// InFlight counts the calls running.
	InFlight() int
	// Idle waits until no call runs, or ctx ends.
	Idle(ctx context.Context) error
	// Close stops the unit gracefully once it is idle.
	Close() error
	// Kill stops the unit by force and waits until it is stopped.
	Kill()
}

// Config configures a Set.
type Config struct {
	// PlanPrefix names the plans: PlanPrefix-1, PlanPrefix-2, ... never
	// reused. Required; the whole ID must be a valid plan ID.
	PlanPrefix string
	// Compiled are the tools of every plan beside the generations'.
	Compiled []tool.Tool
	// Slots is the number of slots, each with at most one active
	// generation.
	Slots int
	// DrainTimeout bounds how long a retired generation that no lease
	// holds waits for its calls in flight before it is stopped by force.
	DrainTimeout time.Duration
	// ShutdownTimeout bounds Close: every generation drains within it,
	// then is stopped by force.
	ShutdownTimeout time.Duration
	// MaxRetainedPlans bounds the plans kept for LeaseExact.
	MaxRetainedPlans int
	// OnEvent, when set, is told of the drains, without the set's lock
	// held. It must return quickly. The events of Activate and Replace
	// are returned to the caller instead, which passes them on (Emit) in
	// its own order.
	OnEvent func(Event)
}

// EventKind names a generation event.
type EventKind string

const (
	EventActivated       EventKind = "plan.activated"      // a new plan serves future leases
	EventCandidateFailed EventKind = "candidate.failed"    // a candidate was refused; the active generation is unchanged
	EventDraining        EventKind = "generation.draining" // retired; drains once no lease holds it
	EventDrained         EventKind = "generation.drained"  // stopped after its calls ended
	EventForced          EventKind = "generation.forced"   // stopped by force with calls in flight
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

// Gen is one generation of a slot.
type Gen struct {
	id   string
	slot int
	unit Unit

	// Guarded by the set's lock.
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

// ID returns "<name>-g<N>", N counting the slot's generations from 1.
func (g *Gen) ID() string { return g.id }

// Slot returns the generation's slot.
func (g *Gen) Slot() int { return g.slot }

// Unit returns what the generation serves.
func (g *Gen) Unit() Unit { return g.unit }

// Done is closed once the generation is stopped.
func (g *Gen) Done() <-chan struct{} { return g.done }

// Info describes one generation.
type Info struct {
	ID     string
	Slot   int
	Unit   Unit
	Leases int
	State  string // active, draining, drained, forced, dead, refused, or pending before activation
}

// PlanInfo is a plan and the generations it holds.
type PlanInfo struct {
	Plan        plan.ID
	Generations []Info
}

// Set is a plan.Source over the compiled tools and the active generation
// of each slot.
type Set struct {
	cfg Config
	wg  sync.WaitGroup

	mu      sync.Mutex
	closed  bool
	seq     uint64
	active  []*Gen
	counts  []int
	current *planEntry
	plans   map[plan.ID]*planEntry
	order   []*planEntry // retained, oldest first
	gens    []*Gen
}

type planEntry struct {
	plan    plan.Plan
	gens    []*Gen
	leases  int
	release func() error
}

var _ plan.Source = (*Set)(nil)

// New validates cfg and returns a set with no plan yet: Activate makes
// the first.
func New(cfg Config) (*Set, error) {
	if cfg.PlanPrefix == "" {
		return nil, bound.Missing("source.plan_prefix")
	}
	durs := []*time.Duration{&cfg.DrainTimeout, &cfg.ShutdownTimeout}
	defs := []time.Duration{DefaultDrainTimeout, DefaultShutdownTimeout}
	for i, d := range durs {
		if *d < 0 {
			return nil, bound.Malformedf("source", "durations must not be negative")
		}
		if *d == 0 {
			*d = defs[i]
		}
	}
	if cfg.MaxRetainedPlans < 0 || cfg.Slots < 0 {
		return nil, bound.Malformedf("source", "counts must not be negative")
	}
	if cfg.MaxRetainedPlans == 0 {
		cfg.MaxRetainedPlans = DefaultMaxRetainedPlans
	}
	return &Set{cfg: cfg, plans: make(map[plan.ID]*planEntry),
		active: make([]*Gen, cfg.Slots), counts: make([]int, cfg.Slots)}, nil
}

// Add registers a verified unit as a generation of slot, not yet active.
// Its ID is name-g<N>. The caller hands it to Activate or Replace, or
// stops it with Discard.
func (s *Set) Add(slot int, name string, u Unit) (*Gen, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if slot < 0 || slot >= len(s.active) {
		return nil, errors.New("toolgen: no slot " + strconv.Itoa(slot))
	}
	s.counts[slot]++
	g := &Gen{id: name + "-g" + strconv.Itoa(s.counts[slot]), slot: slot, unit: u, state: "pending",
		unleased: make(chan struct{}), done: make(chan struct{})}
	s.gens = append(s.gens, g)
	return g, nil
}

// Activate makes each of gs the active generation of its slot, under one
// new plan, and retires the generations that plan no longer holds. On
// error nothing changes. The events are returned, not emitted.
func (s *Set) Activate(gs ...*Gen) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.activateLocked(gs)
}

// Replace activates g in its slot if old is still that slot's active
// generation (ErrStale otherwise): how a candidate made from old — a
// restart of a dead process, say — never overrides a newer one.
func (s *Set) Replace(old, g *Gen) ([]Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if s.active[g.slot] != old {
		return nil, ErrStale
	}
	return s.activateLocked([]*Gen{g})
}

func (s *Set) activateLocked(gs []*Gen) ([]Event, error) {
	prev := append([]*Gen(nil), s.active...)
	for _, g := range gs {
		s.active[g.slot] = g
	}
	tools := append([]tool.Tool(nil), s.cfg.Compiled...)
	var held []*Gen
	for _, g := range s.active {
		if g != nil {
			held = append(held, g)
			tools = append(tools, g.unit.Tools()...)
		}
	}
	pl, err := s.newPlan(tools)
	if err != nil {
		copy(s.active, prev)
		return nil, err
	}
	for _, g := range gs {
		g.state = "active"
	}
	e := &planEntry{plan: pl, gens: held}
	e.release = func() error { s.release(e); return nil }
	old := s.current
	s.current = e
	s.plans[pl.ID()] = e
	s.order = append(s.order, e)
	evs := []Event{{Kind: EventActivated, Plan: pl.ID()}}
	if old != nil {
		for _, g := range old.gens {
			if !contains(held, g) {
				evs = append(evs, s.retire(g))
			}
		}
	}
	s.evict()
	return evs, nil
}

func (s *Set) newPlan(tools []tool.Tool) (plan.Plan, error) {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: tools})
	if err != nil {
		return plan.Plan{}, err
	}
	pl, err := plan.New(plan.ID(s.cfg.PlanPrefix+"-"+strconv.FormatUint(s.seq+1, 10)), d)
	if err != nil {
		return plan.Plan{}, err
	}
	s.seq++
	return pl, nil
}

func contains(gs []*Gen, g *Gen) bool {
	for _, x := range gs {
		if x == g {
			return true
		}
	}
	return false
}

// retire marks g as no longer current and starts its drain. With s.mu.
func (s *Set) retire(g *Gen) Event {
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
func (s *Set) evict() {
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
func (s *Set) Lease(ctx context.Context) (*plan.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if s.closed || s.current == nil {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	e := s.current
	s.take(e)
	s.mu.Unlock()
	return s.newLease(e)
}

// LeaseExact returns a lease on the plan planID while the set retains
// it: a plan whose generations were stopped is no longer retained.
func (s *Set) LeaseExact(ctx context.Context, planID plan.ID) (*plan.Lease, error) {
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
		return nil, ErrClosed
	}
	if !ok {
		return nil, &plan.IDError{ID: planID, Err: plan.ErrUnknownPlan}
	}
	return s.newLease(e)
}

func (s *Set) take(e *planEntry) {
	e.leases++
	for _, g := range e.gens {
		g.leases++
	}
}

func (s *Set) newLease(e *planEntry) (*plan.Lease, error) {
	l, err := plan.NewLease(e.plan, e.release, plan.LeaseConfig{Inline: true})
	if err != nil {
		s.release(e)
		return nil, err
	}
	return l, nil
}

// release is a lease's release: a reference decrement that never blocks
// on a drain (K14).
func (s *Set) release(e *planEntry) {
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

// Emit passes evs to Config.OnEvent. Call it without holding a lock the
// handler might take.
func (s *Set) Emit(evs []Event) {
	if s.cfg.OnEvent == nil {
		return
	}
	for _, e := range evs {
		s.cfg.OnEvent(e)
	}
}

func (e *planEntry) gensOrNil() []*Gen {
	if e == nil {
		return nil
	}
	return e.gens
}

func (g *Gen) markUnleased() {
	if !g.gone {
		g.gone = true
		close(g.unleased)
	}
}
