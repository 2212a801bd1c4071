package orchestrator

import (
	"context"
	"crypto/sha256"
	"errors"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
)

// Pair is one running or finished pair. Its methods are safe for
// concurrent use.
type Pair struct {
	cfg   *settings // shared by a Team's pairs; never written
	task  task
	crew  *crew // the workers: the pair's own, or lent by a Team
	team  *Team // lent the crew; nil for a pair of its own
	lease *plan.Lease
	plan  plan.Plan
	// ctx is the caller's context, which every run gets as is: its end
	// cancels the active run and stops the pair (O6), and runs see its
	// deadline and values. The pair's own stops cancel the active run
	// through its worker's engine (stop.go).
	ctx  context.Context
	tl   timeline      // the pair timeline and the memory of its relayed events
	stop stopState     // Cancel, the budgets, and the pair's hold on its crew
	use  meter         // what the budgets meter
	fin  finalState    // the final answer at the limit (finalanswer.go)
	done chan struct{} // closed when the pair has ended
	rs   *resumeState  // what a resumed pair walks past (resume.go); nil otherwise

	// Owned by the goroutine that plays the pair until done is closed;
	// read-only after.
	prog   progress
	result Result
	err    error
}

// progress is how far the pattern has come.
type progress struct {
	rounds int
	runs   int
	usage  model.Usage
	final  message.Message
	review message.Message
	seen   [][sha256.Size]byte // the digests of every handoff so far (O5)
	// active is the worker the pattern last turned to, and input what it
	// was given: the final answer at the limit starts from them.
	active  int
	input   message.Message
	finalBy string // the worker whose final answer at the limit is final
}

// Start validates cfg, builds both workers, leases the plan source's
// current plan (O2) and runs the pair on its own goroutine. The pair lives
// under ctx: cancelling ctx, or calling Cancel, cancels it (O6).
//
// Errors before the lease leave no trace: no timeline, no run. After it,
// every outcome is reported by the timeline and by Wait.
func Start(ctx context.Context, cfg Config) (*Pair, error) {
	p, err := prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	go p.run()
	return p, nil
}

// Run is Start with the pair running on the calling goroutine: when it
// returns without an error the pair has ended and Wait returns at once.
// Every run of both workers then runs on that goroutine too, without any
// goroutine hand-off.
func Run(ctx context.Context, cfg Config) (*Pair, error) {
	p, err := prepare(ctx, cfg)
	if err != nil {
		return nil, err
	}
	p.run()
	return p, nil
}

func prepare(ctx context.Context, cfg Config) (*Pair, error) {
	n, t, err := cfg.normalize()
	if err != nil {
		return nil, err
	}
	p := &Pair{cfg: &n, task: t, crew: new(crew)}
	if err := p.crew.build(&cfg, n); err != nil {
		return nil, err
	}
	if err := p.open(ctx, &cfg.Timeline); err != nil {
		return nil, err
	}
	return p, nil
}

// open takes the pair from built to ready: it lends the crew to the pair,
// leases the plan and opens the timeline. An error leaves no trace.
func (p *Pair) open(ctx context.Context, tc *TimelineConfig) (err error) {
	p.ctx, p.done = ctx, make(chan struct{})
	p.crew.lend(p)
	if p.lease, err = leaseCurrent(ctx, p.cfg.Plans); err != nil {
		return err
	}
	p.plan = p.lease.Plan()
	if err := p.tl.open(ctx, tc, p.task.pairID, p.cfg); err != nil {
		p.releaseLease()
		return err
	}
	p.fin.arm(p.cfg.Final)
	if d := p.cfg.Budget.WallTime; d > 0 {
		p.stop.wall = time.AfterFunc(d, func() { p.halt(stopWallTime) })
	}
	return nil
}

// leaseCurrent calls the plan source with its panics contained.
func leaseCurrent(ctx context.Context, src plan.Source) (l *plan.Lease, err error) {
	defer func() {
		if recover() != nil {
			l, err = nil, &Error{Reason: ReasonInfrastructure, Err: errPanic}
		}
	}()
	l, err = src.Lease(ctx)
	if err == nil && l == nil {
		err = errors.New("orchestrator: plan source returned no lease")
	}
	return l, err
}

// ID returns the pair ID.
func (p *Pair) ID() string { return p.task.pairID }

// Plan returns the identity of the plan the pair leased; every run of both
// workers uses exactly this plan.
func (p *Pair) Plan() plan.Identity { return p.plan.Identity() }

// Roles returns the first and second workers' roles.
func (p *Pair) Roles() (first, second string) { return p.cfg.Roles[0], p.cfg.Roles[1] }

// Cancel asks the pair to stop: its active run is cancelled and no further
// run starts (O6). It returns at once; Wait reports the end.
func (p *Pair) Cancel() { p.halt(stopCancelled) }

// Done is closed when the pair has ended.
func (p *Pair) Done() <-chan struct{} { return p.done }

// Wait blocks until the pair has ended or ctx is done. The error is nil for
// ReasonCompleted and ReasonApproved, ErrCancelled for a cancelled pair, an
// *Error for every other reason, and a *DurabilityError when the pair
// terminal could not be made durable.
func (p *Pair) Wait(ctx context.Context) (Result, error) {
	select {
	case <-p.done:
		return p.result, p.err
	case <-ctx.Done():
		return Result{}, ctx.Err()
	}
}

// Subscribe returns a cursor over the pair timeline after afterSeq, with
// the same replay-then-tail, gap-free contract as a run log (O7, K19).
func (p *Pair) Subscribe(ctx context.Context, afterSeq uint64) (*eventlog.Subscription, error) {
	return p.tl.log.Subscribe(ctx, afterSeq)
}

// Stats returns the timeline's health stats.
func (p *Pair) Stats() eventlog.Stats { return p.tl.log.Stats() }

// run plays the pattern and always finishes.
func (p *Pair) run() {
	p.finish(p.answerAtLimit(p.play()))
}

// play emits pair.started and follows the pattern. A panic in the pair's
// own code is contained here.
func (p *Pair) play() (out outcome) {
	defer func() {
		if recover() != nil {
			out = outcome{reason: ReasonInfrastructure, err: errPanic}
		}
	}()
	if err := p.tl.emit(Started{
		PairID:          p.task.pairID,
		PlanID:          string(p.plan.ID()),
		PlanFingerprint: p.plan.Fingerprint(),
		Pattern:         p.cfg.Pattern.String(),
		First:           p.cfg.Roles[0],
		Second:          p.cfg.Roles[1],
	}); err != nil {
		return outcome{reason: ReasonInfrastructure, err: err}
	}
	if p.cfg.Started != nil {
		p.cfg.Started(p)
	}
	if p.cfg.Pattern == Relay {
		return p.relay()
	}
	return p.reviewLoop()
}

// finish runs after the last run: it releases the lease exactly once, then
// writes the single pair terminal and closes the timeline (O2, O5).
func (p *Pair) finish(out outcome) {
	if p.stop.wall != nil {
		p.stop.wall.Stop()
	}
	// As in a run's finalization: only observers can block here, and a
	// lease bounds its own release.
	fctx, cancel := p.tl.bound()
	defer cancel()
	if err := p.lease.Release(fctx); err != nil {
		if out.reason.Succeeded() || out.reason == ReasonCancelled {
			out = outcome{reason: ReasonInfrastructure, err: err}
		} else {
			out.err = errors.Join(out.err, err)
		}
	}
	g := &p.prog
	ended := Ended{
		PairID: p.task.pairID, Reason: out.reason, Limit: out.limit, Rounds: g.rounds, Runs: g.runs,
		InputTokens: g.usage.Input(), OutputTokens: g.usage.Output(), ToolCalls: p.tl.toolCalls.Load(),
		Worker: out.worker, RunID: out.runID, Problem: out.problem, FinalAnswer: g.finalBy,
	}
	seq, terr := p.tl.end(fctx, ended)
	p.result = Result{
		Reason: out.reason, Limit: out.limit, Rounds: g.rounds, Runs: g.runs,
		Usage: g.usage, ToolCalls: ended.ToolCalls, Final: g.final, Review: g.review,
		FinalAnswer: g.finalBy, LastSeq: p.tl.log.Stats().LastSeq,
	}
	p.err = out.error()
	if terr != nil {
		p.err = &DurabilityError{Seq: seq, Outcome: p.err, Err: terr}
	}
	close(p.done)
	// After done: a Team's Close, which waits for its crews to come back,
	// then returns only once the pair has ended.
	p.giveBack(fctx)
}

// giveBack ends the pair's hold on its crew once every run has ended: a
// Team gets it back for its next pair, unless a stop shut its engines down;
// a pair's own crew is closed.
func (p *Pair) giveBack(ctx context.Context) {
	reusable := p.stop.held.CompareAndSwap(crewHeld, crewReturned)
	if p.team != nil {
		p.team.put(ctx, p.crew, reusable)
		return
	}
	p.crew.close(ctx)
}

func (p *Pair) releaseLease() {
	ctx, cancel := context.WithTimeout(context.Background(), p.cfg.FinalizeTimeout)
	defer cancel()
	_ = p.lease.Release(ctx)
}
