package orchestrator

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/spice-orch/spice-orch/workers"
)

// crew is a pair's two workers and the relays on their engines. It is lent
// to one pair at a time: to its own pair, or to each pair of a Team in
// turn. Its relays and budget decorators serve the pair it is lent to.
type crew struct {
	workers [2]*workers.Worker
	relays  [2]relay
	plans   [2]workerPlans // each worker's view of the pair's plans (approvalplan.go)
	runs    [2]runTap      // each worker's current run
	final   [2]*finalParts // with Config.OnLimit AnswerAtLimit
	pair    *Pair          // the pair the crew is lent to; nil while idle
}

// build builds the workers from the host's worker configs with the pair's
// parts: the pair's plan source, the budget decorator (when a token or
// tool-call budget is set) and the relay observer (Live delivery).
func (c *crew) build(cfg *Config, n settings) error {
	for i, wc := range [2]workers.Config{cfg.First, cfg.Second} {
		c.plans[i] = workerPlans{inner: n.Plans, c: c, w: i, approval: n.Approval}
		wc.Engine.Plans = &c.plans[i]
		if wc.Engine.IDs != nil {
			c.runs[i].inner = wc.Engine.IDs
			wc.Engine.IDs = &c.runs[i]
		}
		host := wc.Engine.Provider
		if n.Journal && wc.Engine.Provider != nil {
			wc.Engine.Provider = &journaled{inner: wc.Engine.Provider, c: c, w: i}
		}
		if b := n.Budget; (b.Tokens > 0 || b.ToolCalls > 0) && wc.Engine.Provider != nil {
			wc.Engine.Provider = &metered{inner: wc.Engine.Provider, c: c}
		}
		if n.Delivery == Live {
			c.relays[i] = relay{c: c, w: i}
			// Last: a run event reaches the timeline (and what prints
			// it) only once the host's observers, a store, took it, and
			// not at all when one refused it.
			wc.Engine.Required = append(slices.Clone(wc.Engine.Required), &c.relays[i])
		}
		if n.Final.on {
			c.keepFinal(i, wc, host)
		}
		w, err := workers.New(wc)
		if err != nil {
			return err
		}
		c.workers[i] = w
	}
	return nil
}

// lend hands the crew to p: from now on its relays write p's timeline and
// its budget decorators meter p.
func (c *crew) lend(p *Pair) { c.pair = p }

// unlend forgets the pair the crew was lent to, so that an idle crew
// keeps nothing of it alive.
func (c *crew) unlend() { c.pair = nil }

// close refuses new runs on both engines; every run has ended by then.
func (c *crew) close(ctx context.Context) {
	for _, w := range c.workers {
		if w != nil {
			_ = w.Close(ctx)
		}
	}
}

// ErrTeamClosed is returned by Team.Run and Team.Start after Team.Close.
var ErrTeamClosed = errors.New("orchestrator: team closed")

// maxIdleCrews bounds the crews a Team keeps between pairs. A Team that
// plays more pairs at once builds more crews, and closes the surplus as
// those pairs end.
const maxIdleCrews = 64

// Team plays many pairs of one Config, reusing the workers' engines from
// one pair to the next instead of building two engines per pair. A host
// that plays the same two workers over and over (a writer and a reviewer
// on task after task) saves the engines' construction and the first-run
// work an engine keeps for the next one.
//
// Each pair of a Team borrows a crew (its two workers) for its whole life
// and gives it back when it ends; the Team builds a new crew only when all
// of its crews are busy. So a pair's engines are still its own while it
// plays (O1): no two pairs run on one engine at once, and an engine keeps
// no history from one run to the next. A pair that was stopped (Cancel, or
// a budget) shut its crew's engines down; that crew is closed, never lent
// again. A stop that comes after its pair has ended reaches nothing.
//
// A Team is safe for concurrent use.
type Team struct {
	cfg Config // the validated template; each pair brings its ID and task
	n   settings

	mu      sync.Mutex
	idle    []*crew
	busy    int
	closed  bool
	drained chan struct{} // made by Close while pairs play; closed when none does
}

// NewTeam validates cfg as Start does, except that cfg.ID and cfg.Task
// are not used: each pair brings its own (Team.Run). It builds the first
// crew, so that a bad worker config fails here.
func NewTeam(cfg Config) (*Team, error) {
	n, err := cfg.normalizeShared()
	if err != nil {
		return nil, err
	}
	c := new(crew)
	if err := c.build(&cfg, n); err != nil {
		return nil, err
	}
	return &Team{cfg: cfg, n: n, idle: []*crew{c}}, nil
}

// Start is the package-level Start for one pair of the team: pairID names
// the pair (an identifier) and task is the first worker's first input.
func (t *Team) Start(ctx context.Context, pairID, task string) (*Pair, error) {
	p, err := t.prepare(ctx, pairID, task)
	if err != nil {
		return nil, err
	}
	go p.run()
	return p, nil
}

// Run is the package-level Run for one pair of the team: the pair plays on
// the calling goroutine, and has ended when Run returns without an error.
func (t *Team) Run(ctx context.Context, pairID, task string) (*Pair, error) {
	p, err := t.prepare(ctx, pairID, task)
	if err != nil {
		return nil, err
	}
	p.run()
	return p, nil
}

func (t *Team) prepare(ctx context.Context, pairID, task string) (*Pair, error) {
	tk, err := newTask(pairID, task)
	if err != nil {
		return nil, err
	}
	c, err := t.get()
	if err != nil {
		return nil, err
	}
	p := &Pair{cfg: &t.n, task: tk, crew: c, team: t}
	if err := p.open(ctx, &t.cfg.Timeline); err != nil {
		t.put(context.Background(), c, true) // no run started: the crew is as it was
		return nil, err
	}
	return p, nil
}

// get takes an idle crew, or builds one when none is idle.
func (t *Team) get() (*crew, error) {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, ErrTeamClosed
	}
	t.busy++
	if k := len(t.idle); k > 0 {
		c := t.idle[k-1]
		t.idle[k-1] = nil
		t.idle = t.idle[:k-1]
		t.mu.Unlock()
		return c, nil
	}
	t.mu.Unlock()
	c := new(crew)
	if err := c.build(&t.cfg, t.n); err != nil {
		t.put(context.Background(), c, false)
		return nil, err
	}
	return c, nil
}

// put takes a crew back from its pair. A crew that is not reusable, or
// that the team has no room for, is closed.
func (t *Team) put(ctx context.Context, c *crew, reusable bool) {
	c.unlend()
	t.mu.Lock()
	defer t.mu.Unlock()
	if reusable && !t.closed && len(t.idle) < maxIdleCrews {
		t.idle = append(t.idle, c)
	} else {
		// Closed before the crew stops counting as busy, so that Close
		// returns only once it is. Its runs have ended: this never waits.
		c.close(ctx)
	}
	t.busy--
	if t.busy == 0 && t.drained != nil {
		close(t.drained)
		t.drained = nil
	}
}

// Close refuses new pairs, closes the idle crews' engines and waits, at
// most until ctx is done, for the pairs still playing to end; their crews
// are closed as they do. It never cancels a pair: Cancel them first for
// a prompt close. As with engine.Engine.Close, Close drains: the reverse
// of net/http's Server.Close.
func (t *Team) Close(ctx context.Context) error {
	t.mu.Lock()
	t.closed = true
	idle := t.idle
	t.idle = nil
	var wait chan struct{}
	if t.busy > 0 {
		if t.drained == nil {
			t.drained = make(chan struct{})
		}
		wait = t.drained
	}
	t.mu.Unlock()
	for _, c := range idle {
		c.close(ctx)
	}
	if wait == nil {
		return nil
	}
	select {
	case <-wait:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
