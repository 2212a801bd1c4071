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

// outcome is where the loop stands: Running while the run goes on, else
// how the run ended, before finalization.
type outcome struct {
	status  Status
	problem problem.Problem
	cause   error
	final   message.Message // the final answer of a completed run
}

// proceed is the outcome of a step after which the run goes on.
var proceed = outcome{status: Running}

// over reports whether the run has ended.
func (o outcome) over() bool { return o.status != Running }

func failed(p problem.Problem, cause error) outcome {
	return outcome{status: Failed, problem: p, cause: cause}
}

// cancelled is the outcome of a run whose context has ended (K24).
func cancelled() outcome {
	return outcome{status: Cancelled, problem: problemCancelled, cause: ErrCancelled}
}

var (
	problemCancelled   = problem.Must(CodeCancelled, "the run was cancelled")
	problemMaxTurns    = problem.Must(CodeMaxTurns, "the run reached its maximum turns without a final answer")
	problemObserver    = problem.Must(CodeObserverFailed, "a required observer did not accept an event")
	problemLog         = problem.Must(CodeLogExhausted, "the event could not be committed to the run log")
	problemRequest     = problem.Must(CodeInvalidRequest, "the model request could not be built")
	problemID          = problem.Must(CodeInvalidID, "the ID source returned an invalid identifier")
	problemProvider    = problem.Must(CodeProvider, "the model provider failed before streaming")
	problemStream      = problem.Must(CodeStream, "the model stream failed")
	problemTool        = problem.Must(CodeToolFailed, "a tool call failed")
	problemRelease     = problem.Must(CodeReleaseFailed, "the plan lease could not be released")
	problemUnknownTool = problem.Must("unknown_tool", "no tool with this name is available")
)

// loop runs the turn loop and always finalizes.
func (r *Run) loop(fresh bool) {
	r.finalize(r.run(fresh))
}

// run executes turns until the run ends. A panic anywhere in the engine's
// own code is contained here (K25).
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
			return emitFailed(err)
		}
	}
	for {
		switch {
		case r.rctx.Err() != nil:
			return cancelled()
		case r.st.turns >= r.def.maxTurns:
			return failed(problemMaxTurns, nil)
		case r.st.turns > 0 && r.suspend.Load():
			return outcome{status: Suspended}
		}
		if out := r.turn(); out.over() {
			return out
		}
	}
}

// turn runs one turn: one model operation and the tool calls it asked for.
// It returns proceed when the run goes on with another turn.
func (r *Run) turn() outcome {
	turnID, err := newID[id.Turn](r.e, id.KindTurn, "turn_id")
	if err != nil {
		return idFailed(err)
	}
	index := r.st.turns + 1
	if err := r.start(lifecycle{kind: lifeTurn, turn: turnID, index: index},
		event.TurnStarted{RunID: r.id, TurnID: turnID, Index: index}); err != nil {
		return emitFailed(err)
	}
	resp, out := r.model(turnID)
	if out.over() {
		return out
	}
	msg := resp.Message()
	r.st.history = append(r.st.history, msg)
	if msg.NumCalls() > 0 {
		results := make([]tool.Result, 0, msg.NumCalls())
		for call := range msg.Calls() {
			if r.rctx.Err() != nil {
				return cancelled()
			}
			res, out := r.call(turnID, call)
			if out.over() {
				return out
			}
			results = append(results, res)
		}
		rmsg, err := message.Results(results...)
		if err != nil {
			return failed(problemTool, err)
		}
		r.st.history = append(r.st.history, rmsg)
	}
	if err := r.end(event.TurnCompleted{TurnID: turnID, Index: index}); err != nil {
		return emitFailed(err)
	}
	r.st.turns++
	if msg.NumCalls() > 0 {
		return proceed
	}
	return outcome{status: Completed, final: msg}
}

// model runs one model operation.
func (r *Run) model(turnID id.Turn) (model.Response, outcome) {
	opID, err := newID[id.Operation](r.e, id.KindOperation, "operation_id")
	if err != nil {
		return model.Response{}, idFailed(err)
	}
	req, err := model.NewRequest(model.RequestConfig{
		Operation: opID,
		Model:     r.def.model,
		System:    r.def.system,
		Messages:  r.st.history,
		Tools:     r.parts.tools,
	})
	if err != nil {
		return model.Response{}, failed(problemRequest, err)
	}
	if r.rctx.Err() != nil {
		return model.Response{}, cancelled()
	}
	if err := r.start(lifecycle{kind: lifeModel, turn: turnID, op: opID},
		event.ModelStarted{TurnID: turnID, OperationID: opID, Model: r.def.model}); err != nil {
		return model.Response{}, emitFailed(err)
	}
	stream, err := openStream(r.rctx.Context, r.e.cfg.Provider, req)
	if err != nil {
		if r.cancelledWith(err) {
			return model.Response{}, cancelled()
		}
		return model.Response{}, r.failModel(opID, providerProblem(err), false, err)
	}
	var asm model.Assembler
	out := r.consume(opID, stream, &asm)
	if cerr := closeStream(stream); cerr != nil && !out.over() {
		return model.Response{}, r.failModel(opID, problemPanic("model stream"), true, cerr)
	}
	if out.over() {
		return model.Response{}, out
	}
	resp, _ := asm.Response()
	r.st.usage = r.st.usage.Add(resp.Usage())
	if err := r.end(event.ModelCompleted{
		OperationID:  opID,
		InputTokens:  resp.Usage().Input(),
		OutputTokens: resp.Usage().Output(),
		ToolCalls:    resp.Message().NumCalls(),
	}); err != nil {
		return model.Response{}, emitFailed(err)
	}
	return resp, proceed
}

// providerProblem is the problem of a provider that failed before
// streaming: its own, a contained panic, or the engine's generic one.
func providerProblem(err error) problem.Problem {
	if errors.Is(err, errPanic) {
		return problemPanic("model provider")
	}
	if pe, ok := errors.AsType[*model.ProviderError](err); ok {
		return pe.Problem()
	}
	return problemProvider
}

// consume reads the stream to its end under the K23 rules.
func (r *Run) consume(opID id.Operation, s model.Stream, asm *model.Assembler) outcome {
	for {
		if r.rctx.Err() != nil {
			return cancelled()
		}
		it, err := recv(s)
		if err == io.EOF {
			if err := asm.End(); err != nil {
				return r.failModel(opID, problemStream, asm.Observed(), err)
			}
			return proceed
		}
		if err != nil {
			if r.cancelledWith(err) {
				return cancelled()
			}
			p := problemStream
			if errors.Is(err, errPanic) {
				p = problemPanic("model stream")
			}
			// Items may have been observed: never treated as not started.
			return r.failModel(opID, p, true, err)
		}
		r.open[r.nopen-1].observed = true
		if err := asm.Add(it); err != nil {
			return r.failModel(opID, problemStream, true, err)
		}
		switch it.Kind() {
		case model.KindTextDelta:
			if err := r.emit(event.ModelTextDelta{OperationID: opID, Text: it.Text()}); err != nil {
				return emitFailed(err)
			}
		case model.KindFailed:
			// The provider's own failure is the authoritative reason; a
			// failed item counts as observed (K23).
			p, _ := it.Problem()
			return r.failModel(opID, p, true, nil)
		}
		// After the completed item the stream must end with io.EOF: one
		// more Recv, so that an item after the terminal makes the stream
		// malformed instead of going unseen (K23).
	}
}

// idFailed is the run's failure when the ID source failed: a contained
// panic keeps its own problem; anything else is an invalid ID.
func idFailed(err error) outcome {
	if f, ok := errors.AsType[*Failure](err); ok {
		return failed(f.Problem, f.Cause)
	}
	return failed(problemID, err)
}

// failModel ends the open model operation with model.failed and returns the
// run's failure. observed says whether the stream produced anything (K23).
func (r *Run) failModel(opID id.Operation, p problem.Problem, observed bool, cause error) outcome {
	if err := r.end(event.ModelFailed{OperationID: opID, Problem: p, Observed: observed}); err != nil {
		return emitFailed(err)
	}
	return failed(p, cause)
}

// call runs one tool call through the leased dispatcher.
func (r *Run) call(turnID id.Turn, call tool.Call) (tool.Result, outcome) {
	opID, err := newID[id.Operation](r.e, id.KindOperation, "operation_id")
	if err != nil {
		return tool.Result{}, idFailed(err)
	}
	def, known := r.plan.Lookup(call.Name())
	r.openCall = openTool{callID: call.ID(), name: call.Name(), effect: def.Effect()} // read only while the call is open
	started := event.ToolStarted{TurnID: turnID, OperationID: opID, CallID: call.ID(), Name: call.Name()}
	if known {
		started.Effect, started.Replay = def.Effect().String(), def.Replay().String()
	}
	if err := r.start(lifecycle{kind: lifeTool, turn: turnID, op: opID}, started); err != nil {
		return tool.Result{}, emitFailed(err)
	}
	if !known {
		// The model asked for a tool the plan does not have: a mistake
		// the model can correct, so it gets a problem result (K7).
		res, _ := tool.NewProblemResult(call.ID(), problemUnknownTool, "")
		return res, r.endTool(completedCall(opID, call, res), nil)
	}
	rep := newReporter(r, opID, call.ID(), turnID)
	res, err := dispatch(r.rctx.Context, r.plan.Dispatcher(), call, rep)
	obsErr := rep.close()
	end := callEnded(opID, call, def, res, err, r.cancelledWith(err))
	if end.uncertain {
		r.st.uncertain = true
	}
	return res, r.endTool(end, obsErr)
}

// endTool writes a call's terminal and returns the run's outcome. The
// call's own outcome stands in its event, but the run cannot go on with
// events a required observer did not accept (K16).
func (r *Run) endTool(end callEnd, obsErr error) outcome {
	if err := r.end(end.event); err != nil {
		return emitFailed(err)
	}
	if obsErr != nil {
		return failed(problemObserver, obsErr)
	}
	return end.out
}

// callEnd is how a dispatched call ends: its terminal event, the run's
// outcome after it, and whether it leaves a mutating effect uncertain.
type callEnd struct {
	event     event.Payload
	out       outcome
	uncertain bool
}

func completedCall(opID id.Operation, call tool.Call, res tool.Result) callEnd {
	ev := event.ToolCompleted{OperationID: opID, CallID: call.ID(), Name: call.Name(), Content: res.Content()}
	ev.Problem, _ = res.Problem()
	return callEnd{event: ev, out: proceed}
}

// callEnded decides how a dispatched call ends from what the dispatcher
// returned, the call's definition and whether the run's own context had
// ended (only that decides cancellation: K8, K24). It writes nothing.
//
// The outcome the tool reported is kept whether the call failed or was
// cancelled: a mutating call stopped mid-effect is uncertain, and an
// uncertain call is never exported in a snapshot (K7, K29).
func callEnded(opID id.Operation, call tool.Call, def tool.Definition, res tool.Result, err error, runCancelled bool) callEnd {
	if err == nil {
		return completedCall(opID, call, res)
	}
	o := tool.Definitive
	ee, isExec := errors.AsType[*tool.ExecutionError](err)
	if isExec {
		o = ee.Outcome()
	}
	uncertain := o == tool.Uncertain && def.Effect() == tool.Mutating
	if runCancelled {
		return callEnd{
			event:     event.ToolCancelled{OperationID: opID, CallID: call.ID(), Name: call.Name(), Outcome: o.String()},
			out:       cancelled(),
			uncertain: uncertain,
		}
	}
	ev := event.ToolFailed{OperationID: opID, CallID: call.ID(), Name: call.Name(),
		Outcome: o.String(), Retry: tool.NoRetry.String(), Problem: problemTool}
	switch {
	case isExec:
		ev.Retry, ev.Problem = ee.Retry().String(), ee.Problem()
	case errors.Is(err, errPanic):
		ev.Problem = problemPanic("dispatcher")
	}
	return callEnd{event: ev, out: failed(ev.Problem, err), uncertain: uncertain}
}

func isContextErr(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// cancelledWith reports whether err is the run's cancellation: the run's
// own context has ended (K24), and err is a context error or the cause the
// caller gave for the end (a provider or tool returning context.Cause).
func (r *Run) cancelledWith(err error) bool {
	if err == nil || r.rctx.Err() == nil {
		return false
	}
	return isContextErr(err) || errors.Is(err, context.Cause(r.rctx.Context))
}
