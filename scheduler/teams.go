package scheduler

import (
	"context"
	"sync"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// teams plays jobs on orchestrator Teams, one per job config (the
// *orchestrator.Config a host submitted, by pointer), so that the pairs of
// one config borrow the workers' engines a finished pair gave back instead
// of building two engines each: measured in alternating rounds, playing
// every job on its own cost the scheduler 19 % more CPU per pair. A job
// whose config names its pair (Config.ID) plays on its own
// (orchestrator.Run): pairs of one Team are told apart by ID.
//
// The cache holds at most maxTeams Teams; the oldest one no job uses is
// closed to make room. A job uses one Team at a time and at most
// Config.Pairs jobs run at once, so there is always one to close.
type teams struct {
	s   *Scheduler
	max int

	mu     sync.Mutex
	byCfg  map[*orchestrator.Config]*teamEntry
	order  []*orchestrator.Config // oldest first
	starts map[string]*entry      // pair ID to the job waiting for its Started
}

type teamEntry struct {
	team  *orchestrator.Team
	users int
}

func newTeams(s *Scheduler) *teams {
	return &teams{s: s, max: s.cfg.Pairs + 8,
		byCfg: map[*orchestrator.Config]*teamEntry{}, starts: map[string]*entry{}}
}

// play runs the job's pair on its config's Team and returns it, as
// orchestrator.Run does.
func (t *teams) play(ctx context.Context, cfg *orchestrator.Config, pairID string, e *entry) (*orchestrator.Pair, error) {
	te, err := t.get(cfg)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	t.starts[pairID] = e
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.starts, pairID)
		te.users--
		t.mu.Unlock()
	}()
	return te.team.Run(ctx, pairID, cfg.Task)
}

// get returns cfg's Team, building it (and closing the oldest unused
// one when the cache is full), with one more user.
func (t *teams) get(cfg *orchestrator.Config) (*teamEntry, error) {
	t.mu.Lock()
	if e := t.byCfg[cfg]; e != nil {
		e.users++
		t.mu.Unlock()
		return e, nil
	}
	t.mu.Unlock()
	team, err := orchestrator.NewTeam(t.template(cfg))
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if e := t.byCfg[cfg]; e != nil {
		// Another slot built one meanwhile.
		_ = team.Close(context.Background()) // never played: never waits
		e.users++
		return e, nil
	}
	if len(t.order) >= t.max {
		t.evict()
	}
	e := &teamEntry{team: team, users: 1}
	t.byCfg[cfg] = e
	t.order = append(t.order, cfg)
	return e, nil
}

// evict closes the oldest Team no job uses. The caller holds mu.
func (t *teams) evict() {
	for i, cfg := range t.order {
		e := t.byCfg[cfg]
		if e.users > 0 {
			continue
		}
		t.order = append(t.order[:i], t.order[i+1:]...)
		delete(t.byCfg, cfg)
		_ = e.team.Close(context.Background()) // no pair plays on it: never waits
		return
	}
}

// template is the Team's config: the job's, with each provider behind the
// scheduler's model-operation gate and a Started hook that hands each pair
// to the job that plays it.
func (t *teams) template(cfg *orchestrator.Config) orchestrator.Config {
	c := *cfg
	t.s.gateProviders(&c)
	host := c.Started
	c.Started = func(p *orchestrator.Pair) {
		t.mu.Lock()
		e := t.starts[p.ID()]
		t.mu.Unlock()
		if e != nil {
			e.handOver(p)
		}
		if host != nil {
			host(p)
		}
	}
	return c
}

// close closes every Team; the pool has stopped, so no pair plays.
func (t *teams) close() {
	t.mu.Lock()
	byCfg := t.byCfg
	t.byCfg, t.order = map[*orchestrator.Config]*teamEntry{}, nil
	t.mu.Unlock()
	for _, e := range byCfg {
		_ = e.team.Close(context.Background())
	}
}

// gateProviders puts each worker's provider behind the model-operation
// gate, when the scheduler has one.
func (s *Scheduler) gateProviders(cfg *orchestrator.Config) {
	if s.slots == nil {
		return
	}
	for _, w := range [2]*workers.Config{&cfg.First, &cfg.Second} {
		if w.Engine.Provider != nil {
			w.Engine.Provider = &gate{inner: w.Engine.Provider, slots: s.slots}
		}
	}
}
