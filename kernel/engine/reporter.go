package engine

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// ErrReporterClosed is returned to a tool that reports progress or asks a
// question after its call has ended.
var ErrReporterClosed = errors.New("engine: call has ended")

var (
	problemNoBroker = problem.Must(CodeInteraction, "no interaction broker is configured")
	problemBroker   = problem.Must(CodeInteraction, "the interaction broker failed")
	problemAnswer   = problem.Must("invalid_answer", "the answer did not fit the question")
	problemIxEvent  = problem.Must(CodeObserverFailed, "an event of this call could not be recorded")
)

// reporter is what a tool call gets as its tool.Reporter. It writes
// tool.progress events and carries questions to the broker as
// interactions (K28). It is safe for concurrent use by the tool.
type reporter struct {
	r       *Run
	op      id.Operation
	call    id.Call
	turn    id.Turn
	mu      sync.Mutex
	reports sync.RWMutex // read-held by each Report in flight
	closed  bool
	obsErr  error // the first required-observer failure on this call's events
	asks    map[*ask]struct{}
	idle    chan struct{} // closed when asks becomes empty after close
	swept   bool          // close has ended every open interaction
}

type ask struct {
	cancel context.CancelFunc
	stop   func() bool // detaches the run's cancellation from the ask
	// Guarded by reporter.mu: the interaction's ID once interaction.started
	// is committed, and whether its terminal has been claimed.
	ix      id.Interaction
	started bool
	ended   bool
}

var (
	_ tool.Reporter     = (*reporter)(nil)
	_ interaction.Asker = (*reporter)(nil)
)

func newReporter(r *Run, op id.Operation, call id.Call, turn id.Turn) *reporter {
	return &reporter{r: r, op: op, call: call, turn: turn}
}

// Report records one progress report as a tool.progress event.
func (p *reporter) Report(ctx context.Context, pr tool.Progress) error {
	// Held across the append so that close waits for a report in flight:
	// no progress lands after the call's terminal (K9).
	p.reports.RLock()
	defer p.reports.RUnlock()
	p.mu.Lock()
	closed := p.closed
	p.mu.Unlock()
	if closed {
		return ErrReporterClosed
	}
	_, err := p.append(event.ToolProgress{OperationID: p.op, CallID: pr.CallID(), Message: pr.Message()})
	return toolError(err)
}

// Ask puts a question to the broker. The interaction gets exactly one
// terminal event before Ask returns.
func (p *reporter) Ask(ctx context.Context, prompt string, choices ...string) (string, error) {
	a, actx, err := p.begin(ctx)
	if err != nil {
		return "", err
	}
	defer p.finish(a)
	r := p.r
	ixID, err := newID[id.Interaction](r.e, id.KindInteraction, "interaction_id")
	if err != nil {
		return "", err
	}
	if !r.useInteraction(ixID) {
		return "", &Failure{Problem: problemID, Cause: errors.New("engine: interaction ID already used")}
	}
	q, err := interaction.NewQuestion(ixID, prompt, choices...)
	if err != nil {
		return "", err // nothing started: the question itself is invalid
	}
	committed, err := p.startIx(a, ixID, event.InteractionStarted{InteractionID: ixID, TurnID: p.turn, Prompt: prompt})
	if !committed {
		return "", err
	}
	if err != nil {
		return "", p.failIx(a, problemIxEvent, err)
	}
	if r.e.cfg.Broker == nil {
		return "", p.failIx(a, problemNoBroker, errNoBroker)
	}
	ans, err := askBroker(actx, r.e.cfg.Broker, q)
	switch {
	case errors.Is(err, errPanic):
		return "", p.failIx(a, problemPanic("interaction broker"), err)
	case err != nil && actx.Err() != nil && isContextErr(err):
		if aerr := p.endIx(a, event.InteractionCancelled{InteractionID: ixID}); aerr != nil {
			return "", errors.Join(err, toolError(aerr))
		}
		return "", err
	case err != nil:
		return "", p.failIx(a, problemBroker, err)
	}
	if err := q.Check(ans); err != nil {
		return "", p.failIx(a, problemAnswer, err)
	}
	if err := p.endIx(a, event.InteractionAnswered{InteractionID: ixID, Answer: ans.Text()}); err != nil {
		return "", toolError(err)
	}
	return ans.Text(), nil
}

// startIx commits interaction.started for a, unless the call has already
// ended and its interactions were swept.
func (p *reporter) startIx(a *ask, ix id.Interaction, pl event.Payload) (bool, error) {
	p.reports.RLock()
	defer p.reports.RUnlock()
	p.mu.Lock()
	swept := p.swept
	p.mu.Unlock()
	if swept {
		return false, ErrReporterClosed
	}
	committed, err := p.append(pl)
	if committed {
		p.mu.Lock()
		a.ix, a.started = ix, true
		p.mu.Unlock()
	}
	return committed, err
}

// endIx writes a's single terminal, unless the engine already wrote it
// when the call ended (close): an interaction ends exactly once (K28).
func (p *reporter) endIx(a *ask, pl event.Payload) error {
	p.reports.RLock()
	defer p.reports.RUnlock()
	p.mu.Lock()
	if a.ended {
		p.mu.Unlock()
		return ErrReporterClosed
	}
	a.ended = true
	p.mu.Unlock()
	_, err := p.append(pl)
	return err
}

var errNoBroker = errors.New("engine: no interaction broker")

func (p *reporter) failIx(a *ask, pr problem.Problem, cause error) error {
	err := p.endIx(a, event.InteractionFailed{InteractionID: a.ix, Problem: pr})
	return &Failure{Problem: pr, Cause: errors.Join(cause, err)}
}

// toolError is what a tool sees of a failed append: a typed, secret-free
// Failure whose cause (an *eventlog.ObserverError, inspectable with
// errors.As) is not printed, since an observer's message may hold anything.
func toolError(err error) error {
	var oe *eventlog.ObserverError
	if errors.As(err, &oe) {
		return &Failure{Problem: problemIxEvent, Cause: err}
	}
	return err
}

func (p *reporter) begin(ctx context.Context) (*ask, context.Context, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, nil, ErrReporterClosed
	}
	// The ask ends with the tool's context or the run's, whichever ends
	// first: a tool that passes context.Background() cannot hold a run
	// past its cancellation or Shutdown.
	actx, cancel := context.WithCancel(ctx)
	a := &ask{cancel: cancel, stop: context.AfterFunc(p.r.rctx.Context, cancel)}
	if p.asks == nil {
		p.asks = make(map[*ask]struct{})
	}
	p.asks[a] = struct{}{}
	return a, actx, nil
}

func (p *reporter) finish(a *ask) {
	a.stop()
	a.cancel()
	p.mu.Lock()
	delete(p.asks, a)
	if len(p.asks) == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
}

// append commits one of the call's events and remembers a required
// observer's failure: the tool may ignore it, the run may not (K16).
func (p *reporter) append(pl event.Payload) (bool, error) {
	committed, err := p.r.append(pl)
	var oe *eventlog.ObserverError
	if errors.As(err, &oe) {
		p.mu.Lock()
		if p.obsErr == nil {
			p.obsErr = err
		}
		p.mu.Unlock()
	}
	return committed, err
}

// close ends the reporter when the call has returned: later reports and
// questions are refused, questions still in flight are cancelled, and close
// waits for them, bounded by the finalization timeout, so their terminals
// come before the tool's. It returns the first observer failure on the
// call's progress and interaction events.
func (p *reporter) close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.reports.Lock() // waits for reports in flight; later ones see closed
	p.reports.Unlock()
	p.mu.Lock()
	if len(p.asks) == 0 {
		err := p.obsErr
		p.mu.Unlock()
		return err
	}
	for a := range p.asks {
		a.cancel()
	}
	p.idle = make(chan struct{})
	idle := p.idle
	p.mu.Unlock()
	t := time.NewTimer(p.r.e.cfg.FinalizeTimeout)
	defer t.Stop()
	select {
	case <-idle:
	case <-t.C:
	}
	p.sweep()
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.obsErr
}

// sweep ends the interactions still open when the wait for them ran out
// (a broker that ignores its context): the engine writes their cancelled
// terminal now, before the call's own, and a late answer is dropped.
func (p *reporter) sweep() {
	p.reports.Lock() // no start or end of an interaction in flight
	defer p.reports.Unlock()
	p.mu.Lock()
	p.swept = true
	var open []id.Interaction
	for a := range p.asks {
		if a.started && !a.ended {
			a.ended = true
			open = append(open, a.ix)
		}
	}
	p.mu.Unlock()
	slices.Sort(open) // deterministic order
	for _, ix := range open {
		_, _ = p.append(event.InteractionCancelled{InteractionID: ix})
	}
}

// useInteraction records ixID as used; it reports false for a reused ID.
func (r *Run) useInteraction(ixID id.Interaction) bool {
	r.ixMu.Lock()
	defer r.ixMu.Unlock()
	if slices.Contains(r.st.interactions, ixID) {
		return false
	}
	r.st.interactions = append(r.st.interactions, ixID)
	return true
}

func askBroker(ctx context.Context, b interaction.Broker, q interaction.Question) (a interaction.Answer, err error) {
	defer func() {
		if recover() != nil {
			a, err = interaction.Answer{}, errPanic
		}
	}()
	return b.Ask(ctx, q)
}
