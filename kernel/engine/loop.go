package engine

import (
	"context"
	"errors"
	"io"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// outcome is how the loop ended, before finalization.
type outcome struct {
	status  Status
	problem problem.Problem
	cause   error
	final   message.Message
}

func failed(p problem.Problem, cause error) outcome {
	return outcome{status: Failed, problem: p, cause: cause}
}

var (
	problemCancelled = problem.Must(CodeCancelled, "the run was cancelled")
	problemMaxTurns  = problem.Must(CodeMaxTurns, "the run reached its maximum turns without a final answer")
	problemObserver  = problem.Must(CodeObserverFailed, "a required observer did not accept an event")
	problemLog       = problem.Must(CodeLogExhausted, "the event could not be committed to the run log")
	problemRequest   = problem.Must(CodeInvalidRequest, "the model request could not be built")
	problemID        = problem.Must(CodeInvalidID, "the ID source returned an invalid identifier")
	problemProvider  = problem.Must(CodeProvider, "the model provider failed before streaming")
	problemStream    = problem.Must(CodeStream, "the model stream failed")
	problemTool      = problem.Must(CodeToolFailed, "a tool call failed")
	problemRelease   = problem.Must(CodeReleaseFailed, "the plan lease could not be released")
)

// loop runs the turn loop on its own goroutine and always finalizes.
func (r *Run) loop(fresh bool) {
	out := r.run(fresh)
	r.finalize(out)
}

// run executes turns until an outcome is reached. A panic anywhere in the
// engine's own code is contained here (K25).
func (r *Run) run(fresh bool) (out outcome) {
	defer func() {
		if recover() != nil {
			out = failed(problemPanic("engine"), errPanic)
		}
	}()
	if fresh {
		if err := r.emit(event.RunStarted{
			RunID:           r.id,
			PlanID:          string(r.plan.ID()),
			PlanFingerprint: r.parts.fingerprint,
			Definition:      r.def.name,
			Model:           r.def.model,
		}); err != nil {
			return r.emitFailed(err)
		}
	}
	for {
		if r.rctx.Err() != nil {
			return outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}
		}
		if r.st.turns >= r.def.maxTurns {
			return failed(problemMaxTurns, nil)
		}
		if r.st.turns > 0 && r.suspend.Load() {
			return outcome{status: Suspended}
		}
		final, out, done := r.turn()
		if done {
			if out.status == Completed {
				out.final = final
			}
			return out
		}
	}
}

// turn runs one turn: one model operation and the tool calls it asked for.
// done is false when the loop should continue with another turn.
func (r *Run) turn() (final message.Message, out outcome, done bool) {
	turnID, err := newID[id.Turn](r.e, id.KindTurn, "turn_id")
	if err != nil {
		return final, idFailed(err), true
	}
	index := r.st.turns + 1
	if err := r.start(lifecycle{kind: lifeTurn, turn: turnID, index: int32(index)},
		event.TurnStarted{RunID: r.id, TurnID: turnID, Index: index}); err != nil {
		return final, r.emitFailed(err), true
	}
	resp, out, ok := r.model(turnID)
	if !ok {
		return final, out, true
	}
	msg := resp.Message()
	r.st.history = append(r.st.history, msg)
	if msg.NumCalls() == 0 {
		if err := r.end(event.TurnCompleted{TurnID: turnID, Index: index}); err != nil {
			return final, r.emitFailed(err), true
		}
		r.st.turns++
		return msg, outcome{status: Completed}, true
	}
	results := make([]tool.Result, 0, msg.NumCalls())
	for call := range msg.Calls() {
		if r.rctx.Err() != nil {
			return final, outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}, true
		}
		res, out, ok := r.call(turnID, call)
		if !ok {
			return final, out, true
		}
		results = append(results, res)
	}
	rmsg, err := message.Results(results...)
	if err != nil {
		return final, failed(problemTool, err), true
	}
	r.st.history = append(r.st.history, rmsg)
	if err := r.end(event.TurnCompleted{TurnID: turnID, Index: index}); err != nil {
		return final, r.emitFailed(err), true
	}
	r.st.turns++
	return final, out, false
}

// model runs one model operation. ok is false when the run must end.
func (r *Run) model(turnID id.Turn) (resp model.Response, out outcome, ok bool) {
	opID, err := newID[id.Operation](r.e, id.KindOperation, "operation_id")
	if err != nil {
		return resp, idFailed(err), false
	}
	req, err := model.NewRequest(model.RequestConfig{
		Operation: opID,
		Model:     r.def.model,
		System:    r.def.system,
		Messages:  r.st.history,
		Tools:     r.parts.tools,
	})
	if err != nil {
		return resp, failed(problemRequest, err), false
	}
	if r.rctx.Err() != nil {
		return resp, outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}, false
	}
	if err := r.start(lifecycle{kind: lifeModel, turn: turnID, op: opID},
		event.ModelStarted{TurnID: turnID, OperationID: opID, Model: r.def.model}); err != nil {
		return resp, r.emitFailed(err), false
	}
	stream, err := openStream(&r.rctx, r.e.cfg.Provider, req)
	if err != nil {
		if r.cancelledWith(err) {
			return resp, outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}, false
		}
		p := problemProvider
		var pe *model.ProviderError
		if errors.As(err, &pe) {
			p = pe.Problem()
		}
		if errors.Is(err, errPanic) {
			p = problemPanic("model provider")
		}
		return resp, r.failModel(opID, p, false, err), false
	}
	var asm model.Assembler
	out, ok = r.consume(opID, stream, &asm)
	if cerr := closeStream(stream); cerr != nil && ok {
		return resp, r.failModel(opID, problemPanic("model stream"), true, cerr), false
	}
	if !ok {
		return resp, out, false
	}
	resp, _ = asm.Response()
	r.st.usage = r.st.usage.Add(resp.Usage())
	if err := r.end(event.ModelCompleted{
		OperationID:  opID,
		InputTokens:  resp.Usage().Input(),
		OutputTokens: resp.Usage().Output(),
		ToolCalls:    resp.Message().NumCalls(),
	}); err != nil {
		return resp, r.emitFailed(err), false
	}
	return resp, outcome{}, true
}

// consume reads the stream to its end under the K23 rules.
func (r *Run) consume(opID id.Operation, s model.Stream, asm *model.Assembler) (outcome, bool) {
	for {
		if r.rctx.Err() != nil {
			return outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}, false
		}
		it, err := recv(s)
		if err == io.EOF {
			if err := asm.End(); err != nil {
				return r.failModel(opID, problemStream, asm.Observed(), err), false
			}
			break
		}
		if err != nil {
			if r.cancelledWith(err) {
				return outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}, false
			}
			p := problemStream
			if errors.Is(err, errPanic) {
				p = problemPanic("model stream")
			}
			// Items may have been observed: never treated as not started.
			return r.failModel(opID, p, true, err), false
		}
		r.open[r.nopen-1].observed = true
		if err := asm.Add(it); err != nil {
			return r.failModel(opID, problemStream, true, err), false
		}
		switch it.Kind() {
		case model.KindTextDelta:
			if err := r.emit(event.ModelTextDelta{OperationID: opID, Text: it.Text()}); err != nil {
				return r.emitFailed(err), false
			}
		case model.KindFailed:
			// The provider's own failure is the authoritative reason; a
			// failed item counts as observed (K23).
			p, _ := it.Problem()
			return r.failModel(opID, p, true, nil), false
		}
		// After the completed item the stream must end with io.EOF: one
		// more Recv, so that an item after the terminal makes the stream
		// malformed instead of going unseen (K23).
	}
	return outcome{}, true
}

// idFailed is the run's failure when the ID source failed: a contained
// panic keeps its own problem; anything else is an invalid ID.
func idFailed(err error) outcome {
	var f *Failure
	if errors.As(err, &f) {
		return failed(f.Problem, f.Cause)
	}
	return failed(problemID, err)
}

// failModel ends the open model operation with model.failed and returns the
// run's failure. observed says whether the stream produced anything (K23).
func (r *Run) failModel(opID id.Operation, p problem.Problem, observed bool, cause error) outcome {
	if err := r.end(event.ModelFailed{OperationID: opID, Problem: p, Observed: observed}); err != nil {
		return r.emitFailed(err)
	}
	return failed(p, cause)
}

// call runs one tool call through the leased dispatcher.
func (r *Run) call(turnID id.Turn, call tool.Call) (res tool.Result, out outcome, ok bool) {
	opID, err := newID[id.Operation](r.e, id.KindOperation, "operation_id")
	if err != nil {
		return res, idFailed(err), false
	}
	def, known := r.plan.Lookup(call.Name())
	lc := lifecycle{kind: lifeTool, turn: turnID, op: opID}
	r.openCall = openTool{callID: call.ID(), name: call.Name(), effect: def.Effect()} // read only while lc is open
	started := event.ToolStarted{TurnID: turnID, OperationID: opID, CallID: call.ID(), Name: call.Name()}
	if known {
		started.Effect, started.Replay = def.Effect().String(), def.Replay().String()
	}
	if err := r.start(lc, started); err != nil {
		return res, r.emitFailed(err), false
	}
	if !known {
		// The model asked for a tool the plan does not have: a mistake
		// the model can correct, so it gets a problem result (K7).
		res, _ = tool.NewProblemResult(call.ID(), problemUnknownTool, "")
		return r.completeTool(opID, call, res)
	}
	rep := newReporter(r, opID, call.ID(), turnID)
	res, err = dispatch(&r.rctx, r.plan.Dispatcher(), call, rep)
	obsErr := rep.close()
	if err == nil {
		res, out, ok := r.completeTool(opID, call, res)
		if ok && obsErr != nil {
			// The call's own outcome stands; the run cannot go on
			// with events a required observer did not accept (K16).
			return res, failed(problemObserver, obsErr), false
		}
		return res, out, ok
	}
	// The outcome the tool reported is kept whether the call failed or
	// was cancelled: a mutating call stopped mid-effect is uncertain, and
	// an uncertain call is never exported in a snapshot (K7, K29).
	o := tool.Definitive
	var ee *tool.ExecutionError
	if errors.As(err, &ee) {
		o = ee.Outcome()
		if o == tool.Uncertain && def.Effect() == tool.Mutating {
			r.st.uncertain = true
		}
	}
	// Only the run's own context decides cancellation (K8, K24).
	if r.cancelledWith(err) {
		if err := r.end(event.ToolCancelled{OperationID: opID, CallID: call.ID(), Name: call.Name(), Outcome: o.String()}); err != nil {
			return res, r.emitFailed(err), false
		}
		if obsErr != nil {
			return res, failed(problemObserver, obsErr), false
		}
		return res, outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}, false
	}
	failedEv := event.ToolFailed{OperationID: opID, CallID: call.ID(), Name: call.Name(),
		Outcome: o.String(), Retry: tool.NoRetry.String(), Problem: problemTool}
	if ee != nil {
		failedEv.Retry, failedEv.Problem = ee.Retry().String(), ee.Problem()
	} else if errors.Is(err, errPanic) {
		failedEv.Problem = problemPanic("dispatcher")
	}
	if err := r.end(failedEv); err != nil {
		return res, r.emitFailed(err), false
	}
	if obsErr != nil {
		return res, failed(problemObserver, obsErr), false
	}
	return res, failed(failedEv.Problem, err), false
}

var problemUnknownTool = problem.Must("unknown_tool", "no tool with this name is available")

func (r *Run) completeTool(opID id.Operation, call tool.Call, res tool.Result) (tool.Result, outcome, bool) {
	ev := event.ToolCompleted{OperationID: opID, CallID: call.ID(), Name: call.Name(), Content: res.Content()}
	ev.Problem, _ = res.Problem()
	if err := r.end(ev); err != nil {
		return res, r.emitFailed(err), false
	}
	return res, outcome{}, true
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// cancelledWith reports whether err is the run's cancellation: the run's
// own context has ended (K24), and err is a context error or the cause the
// caller gave for the end (a provider or tool returning context.Cause).
func (r *Run) cancelledWith(err error) bool {
	if r.rctx.Err() == nil {
		return false
	}
	return isContextErr(err) || errors.Is(err, context.Cause(&r.rctx))
}
