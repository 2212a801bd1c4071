package telemetry

import (
	"container/list"
	"context"
	"strconv"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Operation names (gen_ai.operation.name) and span name prefixes.
const (
	opWorkflow = "invoke_workflow"
	opAgent    = "invoke_agent"
	opChat     = "chat"
	opTool     = "execute_tool"
)

// error.type values of operations that did not fail with a problem code.
const (
	reasonCancelled   = "cancelled"
	reasonInterrupted = "interrupted" // a replayed timeline without the terminal
	reasonLost        = "lost"        // the observer never saw the terminal
)

// runKey names a run within a pair: run IDs need not be unique across
// the two workers of a pair.
type runKey struct {
	worker string
	run    id.Run
}

type opKey struct {
	run runKey
	op  id.Operation
}

// runSpan is an open invoke_agent span.
type runSpan struct {
	span     trace.Span
	ctx      context.Context
	model    string
	provider string
	w        *worker // nil when the pair was not instrumented
}

// opSpan is an open chat or execute_tool span.
type opSpan struct {
	span     trace.Span
	at       time.Time
	tool     bool
	name     string // the model, or the tool's name
	provider string
	w        *worker // nil when the pair was not instrumented
}

// pairTrace is the drawing of one pair. Its mutex serializes the events
// of its timeline with an eviction from another goroutine.
type pairTrace struct {
	key    string
	el     *list.Element     // in Telemetry.order
	parent trace.SpanContext // the span Continue named, if any
	// workers is what Instrument learned of the pair's workers, by role.
	workers map[string]*worker

	mu      sync.Mutex
	pairID  string
	pattern string
	root    trace.Span
	ctx     context.Context // the root span's context
	lastSeq uint64
	lastAt  time.Time
	lost    uint64
	runs    map[runKey]*runSpan
	ops     map[opKey]*opSpan
	last    runKey            // the run that ended last
	lastSC  trace.SpanContext // its span
	link    *trace.Link       // a handoff waiting for the next run
}

// applyLocked is apply under the pair's lock, released even if a tracer
// panics (Observe contains the panic).
func (pt *pairTrace) applyLocked(t *Telemetry, st *step, live bool) bool {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	return pt.apply(t, st, live)
}

// abandonLocked is abandon under the pair's lock.
func (pt *pairTrace) abandonLocked(t *Telemetry, at time.Time, errType string) {
	pt.mu.Lock()
	defer pt.mu.Unlock()
	pt.abandon(t, at, errType)
}

// apply draws one step and reports whether the pair has ended.
func (pt *pairTrace) apply(t *Telemetry, st *step, live bool) bool {
	if pt.lastSeq != 0 && st.seq > pt.lastSeq+1 {
		pt.lost += st.seq - pt.lastSeq - 1
		t.lost.Add(st.seq - pt.lastSeq - 1)
	}
	before := pt.lastAt
	pt.lastSeq, pt.lastAt = st.seq, zeroTime(st.at)
	switch st.class {
	case stepStart:
		pt.begin(t, st)
	case stepResume:
		pt.resumed(t, st, before)
	case stepRun:
		if pt.ctx == nil {
			return false
		}
		pt.relayed(t, st, live)
	case stepHandoff:
		if pt.root != nil {
			pt.handedOff(st)
		}
	case stepEnd:
		pt.finish(t, st, live)
		return true
	}
	return false
}

func (pt *pairTrace) begin(t *Telemetry, st *step) {
	s := st.start
	pt.pairID, pt.pattern = s.pairID, s.pattern
	pt.runs = make(map[runKey]*runSpan, 2)
	pt.ops = make(map[opKey]*opSpan, 2)
	base := context.Background()
	if pt.parent.IsValid() {
		base = trace.ContextWithRemoteSpanContext(base, pt.parent)
	}
	if t.tracer == nil {
		pt.ctx = base
		return
	}
	pt.ctx, pt.root = t.tracer.Start(withSpanKey(base, "pair\x00"+s.pairID), opWorkflow+" "+s.pattern,
		trace.WithTimestamp(zeroTime(st.at)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(
			semconv.GenAIOperationNameInvokeWorkflow,
			semconv.GenAIConversationID(s.pairID),
			semconv.GenAIWorkflowName(s.pattern),
			attribute.String("spice_orch.plan.id", s.planID),
			attribute.String("spice_orch.plan.fingerprint", s.fingerprint),
			attribute.StringSlice("spice_orch.pair.workers", []string{s.first, s.second}),
		))
}

// resumed draws a pair.resumed. In a drawing that holds the pair from its
// start (a replay of its whole record) the runs that were open were cut
// off where the record ends: they end there, as interrupted, and the pair
// span notes the resume. A drawing that starts here (the resumed pair,
// live) is a trace of its own, whose pair span links to the span of the
// pair it continues.
func (pt *pairTrace) resumed(t *Telemetry, st *step, before time.Time) {
	r := st.resume
	attrs := []attribute.KeyValue{
		attribute.Int64("spice_orch.pair.resumed_from_seq", int64(r.fromSeq)),
		attribute.Int("spice_orch.pair.resumes", r.resumes),
		attribute.String("spice_orch.pair.resume_boundary", r.boundary),
	}
	if r.runID != "" {
		attrs = append(attrs, attribute.String("spice_orch.pair.restarted_run_id", string(r.runID)))
	}
	if pt.ctx != nil {
		if before.IsZero() {
			before = zeroTime(st.at)
		}
		pt.closeOpen(before, reasonInterrupted)
		if pt.root != nil {
			pt.root.AddEvent("pair.resumed", trace.WithTimestamp(zeroTime(st.at)), trace.WithAttributes(attrs...))
		}
		return
	}
	pt.pairID = r.pairID
	for _, w := range pt.workers {
		if w != nil && w.pattern != "" {
			pt.pattern = w.pattern
		}
	}
	pt.runs = make(map[runKey]*runSpan, 2)
	pt.ops = make(map[opKey]*opSpan, 2)
	base := context.Background()
	if pt.parent.IsValid() {
		base = trace.ContextWithRemoteSpanContext(base, pt.parent)
	}
	if t.tracer == nil {
		pt.ctx = base
		return
	}
	// The span of the pair as it was drawn first, with the IDs the
	// package derives for it (IDGenerator): a pair that continued a
	// caller's trace was drawn in that trace instead, which the resumed
	// timeline does not name.
	key := "pair\x00" + r.pairID
	var tid trace.TraceID
	sum := derive("trace", nil, key)
	copy(tid[:], sum[:])
	if !tid.IsValid() {
		tid[0] = 1
	}
	first := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: deriveSpanID(tid, key), TraceFlags: trace.FlagsSampled, Remote: true})
	name := opWorkflow
	if pt.pattern != "" {
		name += " " + pt.pattern
	}
	attrs = append(attrs, semconv.GenAIOperationNameInvokeWorkflow, semconv.GenAIConversationID(r.pairID))
	if pt.pattern != "" {
		attrs = append(attrs, semconv.GenAIWorkflowName(pt.pattern))
	}
	pt.ctx, pt.root = t.tracer.Start(withSpanKey(base, key+"\x00resume\x00"+strconv.Itoa(r.resumes)), name,
		trace.WithTimestamp(zeroTime(st.at)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithLinks(trace.Link{SpanContext: first, Attributes: []attribute.KeyValue{attribute.String("spice_orch.link", "resumed_pair")}}),
		trace.WithAttributes(attrs...))
}

func (pt *pairTrace) relayed(t *Telemetry, st *step, live bool) {
	rk := runKey{st.worker, st.runID}
	switch p := st.run.(type) {
	case event.RunStarted:
		pt.startRun(t, st, rk, p)
	case event.RunCompleted:
		attrs := usage(p.InputTokens, p.OutputTokens, p.Turns)
		if t.content && p.FinalText != "" {
			attrs = append(attrs, attribute.String("spice_orch.run.final_text", p.FinalText))
		}
		pt.endRun(rk, st.at, "", "", attrs)
	case event.RunFailed:
		pt.endRun(rk, st.at, p.Problem.Code(), t.message(p.Problem), usage(p.InputTokens, p.OutputTokens, p.Turns))
	case event.RunCancelled:
		pt.endRun(rk, st.at, reasonCancelled, "", usage(p.InputTokens, p.OutputTokens, p.Turns))
	case event.ModelStarted:
		pt.startModel(t, st, rk, p)
	case event.ModelCompleted:
		if op := pt.takeOp(rk, p.OperationID); op != nil {
			op.span.SetAttributes(
				semconv.GenAIUsageInputTokens(int(p.InputTokens)),
				semconv.GenAIUsageOutputTokens(int(p.OutputTokens)),
				attribute.Int("spice_orch.model.tool_calls", p.ToolCalls))
			op.span.SetAttributes(op.response(p.OperationID)...)
			op.span.End(trace.WithTimestamp(zeroTime(st.at)))
			if live {
				t.inst.chat(op, st.at, "", p.InputTokens, p.OutputTokens, true)
			}
		}
	case event.ModelFailed:
		if op := pt.takeOp(rk, p.OperationID); op != nil {
			op.response(p.OperationID)
			t.fail(op.span, p.Problem)
			op.span.End(trace.WithTimestamp(zeroTime(st.at)))
			if live {
				t.inst.chat(op, st.at, errorType(p.Problem), 0, 0, false)
			}
		}
	case event.ModelCancelled:
		if op := pt.takeOp(rk, p.OperationID); op != nil {
			op.response(p.OperationID)
			cancel(op.span)
			op.span.End(trace.WithTimestamp(zeroTime(st.at)))
			if live {
				t.inst.chat(op, st.at, reasonCancelled, 0, 0, false)
			}
		}
	case event.ToolStarted:
		pt.startTool(t, st, rk, p)
	case event.ToolCompleted:
		if op := pt.takeOp(rk, p.OperationID); op != nil {
			outcome := "ok"
			if !p.Problem.IsZero() {
				outcome = "problem"
				t.fail(op.span, p.Problem)
			}
			op.span.SetAttributes(attribute.String("spice_orch.tool.outcome", outcome))
			if t.content && p.Content != "" {
				op.span.SetAttributes(semconv.GenAIToolCallResultKey.String(p.Content))
			}
			op.span.End(trace.WithTimestamp(zeroTime(st.at)))
			if live {
				t.inst.tool(op.name, outcome)
			}
		}
	case event.ToolFailed:
		if op := pt.takeOp(rk, p.OperationID); op != nil {
			t.fail(op.span, p.Problem)
			op.span.SetAttributes(attribute.String("spice_orch.tool.outcome", p.Outcome))
			if p.Retry != "" {
				op.span.SetAttributes(attribute.String("spice_orch.tool.retry", p.Retry))
			}
			op.span.End(trace.WithTimestamp(zeroTime(st.at)))
			if live {
				t.inst.tool(op.name, p.Outcome)
			}
		}
	case event.ToolCancelled:
		if op := pt.takeOp(rk, p.OperationID); op != nil {
			cancel(op.span)
			op.span.SetAttributes(attribute.String("spice_orch.tool.outcome", p.Outcome))
			op.span.End(trace.WithTimestamp(zeroTime(st.at)))
			if live {
				t.inst.tool(op.name, reasonCancelled)
			}
		}
	}
}

func (pt *pairTrace) startRun(t *Telemetry, st *step, rk runKey, p event.RunStarted) {
	if _, open := pt.runs[rk]; open || pt.root == nil && t.tracer != nil {
		return
	}
	w := pt.workers[rk.worker]
	r := &runSpan{model: p.Model, provider: t.providerOf(w, rk.worker), w: w}
	pt.runs[rk] = r
	if t.tracer == nil {
		r.span = trace.SpanFromContext(pt.ctx) // non-recording
		r.ctx = pt.ctx
		return
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameInvokeAgent,
		semconv.GenAIAgentName(rk.worker),
		// One worker of a pair is one agent, whatever run it is in.
		semconv.GenAIAgentID(pt.pairID + "/" + rk.worker),
		semconv.GenAIConversationID(pt.pairID),
		semconv.GenAIProviderNameKey.String(r.provider),
		attribute.String("spice_orch.run.id", string(rk.run)),
	}
	if p.Model != "" {
		attrs = append(attrs, semconv.GenAIRequestModel(p.Model))
	}
	opts := []trace.SpanStartOption{
		trace.WithTimestamp(zeroTime(st.at)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...),
	}
	if pt.link != nil {
		opts = append(opts, trace.WithLinks(*pt.link))
		pt.link = nil
	}
	r.ctx, r.span = t.tracer.Start(withSpanKey(pt.ctx, "run\x00"+pt.pairID+"\x00"+rk.worker+"\x00"+string(rk.run)),
		opAgent+" "+rk.worker, opts...)
}

// endRun ends a run span with its usage; errType, if set, marks it failed.
func (pt *pairTrace) endRun(rk runKey, at time.Time, errType, msg string, attrs []attribute.KeyValue) {
	r, ok := pt.runs[rk]
	if !ok {
		return
	}
	delete(pt.runs, rk)
	for k, op := range pt.ops {
		if k.run == rk {
			delete(pt.ops, k)
			abandonSpan(op.span, at, reasonLost)
		}
	}
	if pt.root == nil {
		return
	}
	r.span.SetAttributes(attrs...)
	if errType != "" {
		markError(r.span, errType, msg)
	}
	r.span.End(trace.WithTimestamp(zeroTime(at)))
	pt.last, pt.lastSC = rk, r.span.SpanContext()
}

func (pt *pairTrace) startModel(t *Telemetry, st *step, rk runKey, p event.ModelStarted) {
	r, ok := pt.runs[rk]
	if !ok {
		return
	}
	model := p.Model
	if model == "" {
		model = r.model
	}
	op := &opSpan{at: st.at, name: model, provider: r.provider, w: r.w}
	pt.ops[opKey{rk, p.OperationID}] = op
	if t.tracer == nil || pt.root == nil {
		op.span = trace.SpanFromContext(r.ctx)
		return
	}
	name := opChat
	attrs := make([]attribute.KeyValue, 0, 9)
	attrs = append(attrs, semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameKey.String(r.provider),
		semconv.GenAIConversationID(pt.pairID),
		// Every model operation of the kernel is a stream.
		semconv.GenAIRequestStream(true))
	if model != "" {
		name += " " + model
		attrs = append(attrs, semconv.GenAIRequestModel(model))
	}
	if w := r.w; w != nil {
		if w.host != "" {
			attrs = append(attrs, semconv.ServerAddress(w.host))
			if w.port > 0 {
				attrs = append(attrs, semconv.ServerPort(w.port))
			}
		}
		if w.hasTemp {
			attrs = append(attrs, semconv.GenAIRequestTemperature(w.temp))
		}
		if w.maxTokens > 0 {
			attrs = append(attrs, semconv.GenAIRequestMaxTokens(int(w.maxTokens)))
		}
	}
	_, op.span = t.tracer.Start(withSpanKey(r.ctx, pt.opSpanKey(rk, p.OperationID)), name,
		trace.WithTimestamp(zeroTime(st.at)),
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrs...))
}

func (pt *pairTrace) startTool(t *Telemetry, st *step, rk runKey, p event.ToolStarted) {
	r, ok := pt.runs[rk]
	if !ok {
		return
	}
	op := &opSpan{at: st.at, tool: true, name: p.Name}
	pt.ops[opKey{rk, p.OperationID}] = op
	if t.tracer == nil || pt.root == nil {
		op.span = trace.SpanFromContext(r.ctx)
		return
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(p.Name),
		semconv.GenAIToolCallID(string(p.CallID)),
		semconv.GenAIToolTypeKey.String("function"),
		semconv.GenAIConversationID(pt.pairID),
	}
	if r.w != nil {
		if d := r.w.toolDescription(p.Name); d != "" {
			attrs = append(attrs, semconv.GenAIToolDescription(d))
		}
	}
	if p.Effect != "" {
		attrs = append(attrs, attribute.String("spice_orch.tool.effect", p.Effect))
	}
	if p.Replay != "" {
		attrs = append(attrs, attribute.String("spice_orch.tool.replay", p.Replay))
	}
	_, op.span = t.tracer.Start(withSpanKey(r.ctx, pt.opSpanKey(rk, p.OperationID)), opTool+" "+p.Name,
		trace.WithTimestamp(zeroTime(st.at)),
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrs...))
}

func (pt *pairTrace) opSpanKey(rk runKey, op id.Operation) string {
	return "op\x00" + pt.pairID + "\x00" + rk.worker + "\x00" + string(rk.run) + "\x00" + string(op)
}

// takeOp returns and forgets an open operation, nil when there is none.
func (pt *pairTrace) takeOp(rk runKey, op id.Operation) *opSpan {
	k := opKey{rk, op}
	o, ok := pt.ops[k]
	if !ok {
		return nil
	}
	delete(pt.ops, k)
	return o
}

// handedOff records a handoff as an event of the pair span, and as a link
// from the next run's span to the span of the run the answer came from.
func (pt *pairTrace) handedOff(st *step) {
	h := st.handoff
	attrs := []attribute.KeyValue{
		attribute.Int("spice_orch.handoff.round", h.round),
		attribute.String("spice_orch.handoff.from", h.from),
		attribute.String("spice_orch.handoff.to", h.to),
		attribute.String("spice_orch.handoff.from_run_id", h.fromRun),
		attribute.Int64("spice_orch.handoff.last_seq", int64(h.lastSeq)),
		attribute.String("spice_orch.handoff.sha256", h.digest),
		attribute.Int("spice_orch.handoff.bytes", h.bytes),
		attribute.Int("spice_orch.handoff.answer_bytes", h.answerBytes),
		attribute.Bool("spice_orch.handoff.cut", h.cut),
	}
	pt.root.AddEvent("handoff", trace.WithTimestamp(zeroTime(st.at)), trace.WithAttributes(attrs...))
	if pt.last == (runKey{h.from, id.Run(h.fromRun)}) && pt.lastSC.IsValid() {
		pt.link = &trace.Link{SpanContext: pt.lastSC, Attributes: attrs}
	}
}

// finish ends the pair span with its terminal, and anything left open.
func (pt *pairTrace) finish(t *Telemetry, st *step, live bool) {
	e := st.end
	pt.closeOpen(st.at, reasonLost)
	if live {
		t.inst.pairEnded(pt.pattern, e.reason)
	}
	if pt.root == nil {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("spice_orch.pair.reason", e.reason),
		attribute.Int("spice_orch.pair.rounds", e.rounds),
		attribute.Int("spice_orch.pair.runs", e.runs),
		// Not gen_ai.usage.*: the runs' spans carry those, and their
		// chat spans again; a backend summing them must not count the
		// pair's tokens a third time.
		attribute.Int64("spice_orch.pair.input_tokens", e.in),
		attribute.Int64("spice_orch.pair.output_tokens", e.out),
		attribute.Int64("spice_orch.pair.tool_calls", e.toolCalls),
	}
	if e.limit != "" {
		attrs = append(attrs, attribute.String("spice_orch.pair.limit", e.limit))
	}
	if e.worker != "" {
		attrs = append(attrs, attribute.String("spice_orch.pair.failed_worker", e.worker))
	}
	if pt.lost > 0 {
		attrs = append(attrs, attribute.Int64("spice_orch.telemetry.lost_events", int64(pt.lost)))
	}
	pt.root.SetAttributes(attrs...)
	switch st.kind {
	case orchestrator.KindCancelled:
		markError(pt.root, reasonCancelled, "")
	case orchestrator.KindFailed:
		markError(pt.root, e.reason, e.code)
	}
	pt.root.End(trace.WithTimestamp(zeroTime(st.at)))
}

// closeOpen ends every open run and operation span as errType.
func (pt *pairTrace) closeOpen(at time.Time, errType string) {
	for k, op := range pt.ops {
		delete(pt.ops, k)
		abandonSpan(op.span, at, errType)
	}
	for k, r := range pt.runs {
		delete(pt.runs, k)
		abandonSpan(r.span, at, errType)
	}
}

// abandon ends a pair that will not get its terminal: every open span
// ends at, as errType.
func (pt *pairTrace) abandon(t *Telemetry, at time.Time, errType string) {
	pt.closeOpen(at, errType)
	if pt.root != nil {
		if pt.lost > 0 {
			pt.root.SetAttributes(attribute.Int64("spice_orch.telemetry.lost_events", int64(pt.lost)))
		}
		abandonSpan(pt.root, at, errType)
		pt.root = nil
	}
}

func abandonSpan(s trace.Span, at time.Time, errType string) {
	markError(s, errType, "")
	s.End(trace.WithTimestamp(zeroTime(at)))
}

func usage(in, out int64, turns int) []attribute.KeyValue {
	return []attribute.KeyValue{
		semconv.GenAIUsageInputTokens(int(in)),
		semconv.GenAIUsageOutputTokens(int(out)),
		attribute.Int("spice_orch.run.turns", turns),
	}
}

// errorType is a problem's error.type: its code, which is a bound.Name.
func errorType(p problem.Problem) string {
	if p.IsZero() {
		return "_OTHER"
	}
	return p.Code()
}

// fail marks a span failed with a problem.
func (t *Telemetry) fail(s trace.Span, p problem.Problem) { markError(s, errorType(p), t.message(p)) }

// message is a problem's message when content is recorded, "" otherwise:
// a model server's error text can quote the prompt.
func (t *Telemetry) message(p problem.Problem) string {
	if !t.content {
		return ""
	}
	return p.Message()
}

// response returns the attributes of what the operation's response said
// of itself (Instrument), and forgets it.
func (op *opSpan) response(opID id.Operation) []attribute.KeyValue {
	if op.w == nil {
		return nil
	}
	r, ok := op.w.takeResponse(opID)
	if !ok {
		return nil
	}
	var attrs []attribute.KeyValue
	if r.model != "" {
		attrs = append(attrs, semconv.GenAIResponseModel(r.model))
	}
	if r.id != "" {
		attrs = append(attrs, semconv.GenAIResponseID(r.id))
	}
	if r.finish != "" {
		attrs = append(attrs, semconv.GenAIResponseFinishReasons(r.finish))
	}
	return attrs
}

func cancel(s trace.Span) { markError(s, reasonCancelled, "") }

// markError sets the error status and error.type. The description is a
// problem's message when content is recorded (the kernel keeps it free of
// secrets, K3, but not of prompt text), else the error type.
func markError(s trace.Span, errType, msg string) {
	s.SetAttributes(semconv.ErrorTypeKey.String(errType))
	if msg == "" {
		msg = errType
	}
	s.SetStatus(codes.Error, msg)
}
