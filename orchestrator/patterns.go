package orchestrator

import (
	"errors"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// The two patterns (O4), top to bottom. Every step that can end the pair
// returns ok == false with the outcome; the caller returns it unchanged.

const (
	first  = 0
	second = 1
)

// relay runs the first worker on the task and the second on its answer.
func (p *Pair) relay() outcome {
	p.prog.rounds = 1
	draft, out, ok := p.step(first, p.task.msg)
	if !ok {
		return out
	}
	h, out, ok := p.handoff(first, draft, second)
	if !ok {
		return out
	}
	answer, out, ok := p.step(second, h.Message())
	if !ok {
		return out
	}
	p.prog.final = answer.Final
	return outcome{reason: ReasonCompleted}
}

// reviewLoop runs the first worker, then the second on its answer, until
// the second approves or a limit ends the pair.
func (p *Pair) reviewLoop() outcome {
	input := p.task.msg
	for round := 1; ; round++ {
		p.prog.rounds = round
		draft, out, ok := p.step(first, input)
		if !ok {
			return out
		}
		p.prog.final = draft.Final
		h, out, ok := p.handoff(first, draft, second)
		if !ok {
			return out
		}
		review, out, ok := p.step(second, h.Message())
		if !ok {
			return out
		}
		p.prog.review = review.Final
		if p.cfg.Policy.Done(review.Final) {
			return outcome{reason: ReasonApproved}
		}
		if round == p.cfg.MaxRounds {
			return outcome{reason: ReasonMaxRounds}
		}
		if h, out, ok = p.handoff(second, review, first); !ok {
			return out
		}
		input = h.Message()
	}
}

// finished is a worker run that completed.
type finished struct {
	RunID id.Run
	engine.Result
}

// step runs worker w on msg under the pair's plan and returns the
// completed run. It starts no run once the pair has been stopped or its
// token budget is spent, and it checks again after the run: a stop that
// arrived while the run was active ends the pair, whatever the run did.
func (p *Pair) step(w int, msg message.Message) (finished, outcome, bool) {
	p.prog.active, p.prog.input = w, msg
	if out, stopped := p.interrupted(); stopped {
		return finished{}, out, false
	}
	if p.rs != nil {
		if f, out, ok, done := p.replayedStep(w); done {
			return f, out, ok
		}
	}
	if p.tokensSpent() {
		p.halt(stopTokens)
		out, _ := p.interrupted()
		return finished{}, out, false
	}
	worker := p.crew.workers[w]
	r, err := worker.Run(p.ctx, engine.Input{Message: msg, Plan: p.plan.ID()})
	p.afterLiveRun()
	if err != nil {
		// No run started: errors before a run's lease leave no trace.
		if out, stopped := p.interrupted(); stopped {
			return finished{}, out, false
		}
		return finished{}, p.workerFailed(w, "", err), false
	}
	p.prog.runs++
	res, err := r.Wait(p.tl.appendCtx) // returns at once: Run has ended the run
	p.prog.usage = p.prog.usage.Add(res.Usage)
	if p.cfg.Delivery == AfterRun {
		p.copyRun(w, r, res.LastSeq)
	}
	if f := p.tl.failure.Load(); f != nil {
		return finished{}, outcome{reason: ReasonInfrastructure, err: *f}, false
	}
	if out, stopped := p.interrupted(); stopped {
		return finished{}, out, false
	}
	if err != nil {
		return finished{}, p.workerFailed(w, r.ID(), err), false
	}
	return finished{RunID: r.ID(), Result: res}, outcome{}, true
}

// handoff builds the next worker's message from a finished run, records its
// provenance in the timeline and ends the pair on a rejected or repeated
// handoff (O3, O5).
func (p *Pair) handoff(from int, f finished, to int) (handoff.Handoff, outcome, bool) {
	if out, stopped := p.interrupted(); stopped {
		return handoff.Handoff{}, out, false
	}
	role := p.crew.workers[from].Role()
	h, err := p.cfg.Policy.Build(handoff.Input{
		Task: p.task.text, From: role, To: p.crew.workers[to].Role(), RunID: f.RunID, Result: f.Result,
	})
	if err != nil {
		return h, outcome{reason: ReasonHandoffRejected, worker: role, runID: f.RunID, err: err}, false
	}
	prov := h.Provenance()
	if out, recorded := p.replayedHandoff(from, f.RunID, prov); recorded {
		if out.reason != 0 {
			return h, out, false
		}
	} else if err := p.tl.emit(HandedOff{
		Round: p.prog.rounds, From: prov.From, To: prov.To, FromRunID: prov.RunID, LastSeq: prov.LastSeq,
		SHA256: prov.SHA256, Bytes: prov.Bytes, AnswerBytes: prov.AnswerBytes, Cut: prov.Cut,
	}); err != nil {
		return h, outcome{reason: ReasonInfrastructure, err: err}, false
	}
	for _, d := range p.prog.seen {
		if d == prov.SHA256 {
			return h, outcome{reason: ReasonLoopDetected, worker: role, runID: f.RunID}, false
		}
	}
	// A relay hands off once: only a review loop has a later handoff
	// that could repeat this one.
	if p.cfg.Pattern == ReviewLoop {
		p.prog.seen = append(p.prog.seen, prov.SHA256)
	}
	return h, outcome{}, true
}

// outcome is how the pattern ended, before the lease release and the
// terminal.
type outcome struct {
	reason  Reason
	limit   Limit
	worker  string
	runID   id.Run
	problem problem.Problem
	err     error
}

func (p *Pair) workerFailed(w int, runID id.Run, err error) outcome {
	out := outcome{reason: ReasonWorkerFailed, worker: p.crew.workers[w].Role(), runID: runID, err: err}
	var f *engine.Failure
	if errors.As(err, &f) {
		out.problem = f.Problem
	}
	return out
}

// error returns what Wait reports for the outcome.
func (o outcome) error() error {
	switch {
	case o.reason.Succeeded():
		return nil
	case o.reason == ReasonCancelled:
		return ErrCancelled
	}
	return &Error{Reason: o.reason, Limit: o.limit, Worker: o.worker, RunID: o.runID, Err: o.err}
}
