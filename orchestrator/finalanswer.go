package orchestrator

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/workers"
)

// A final answer at the limit. When max rounds or a budget ends a pair
// whose Config.OnLimit is AnswerAtLimit, the worker that holds the latest
// draft gets one last run: one model operation, no tools, asked for its
// best final answer, within the share of the budget the pair kept back for
// it. The pair still ends with the limit's reason.
//
// The run is an ordinary kernel run on an engine built from the worker's
// own engine config (its provider, ID source, clock, broker, observers and
// the pair's relay), with two differences: its plan source offers one
// empty plan, so the model is offered no tool and the dispatcher knows
// none; and its definition allows one turn. An empty plan rather than the
// pair's plan with its calls denied: the model is not shown tools it may
// not use, and no tool event can appear. The worker's own engine cannot
// serve: a budget stop has shut it down.

// OnLimit says what a pair does when max rounds or a budget ends it.
type OnLimit uint8

const (
	// StopAtLimit ends the pair at once (the default).
	StopAtLimit OnLimit = iota
	// AnswerAtLimit gives the worker holding the latest draft one last
	// model operation without tools for its best final answer.
	AnswerAtLimit
)

func (o OnLimit) String() string {
	switch o {
	case StopAtLimit:
		return "stop"
	case AnswerAtLimit:
		return "final_answer"
	}
	return "on_limit(" + strconv.Itoa(int(o)) + ")"
}

// Final-answer reserve: the share of the token and wall-time budgets kept
// for the final answer.
const (
	DefaultFinalAnswerReserve = 0.1
	MaxFinalAnswerReserve     = 0.5
)

// Problem codes of a final answer the pair refused.
const (
	CodeFinalAnswerOverReserve = "final_answer_over_reserve"
	CodeFinalAnswerToolCall    = "final_answer_tool_call"
)

// KindFinalAnswer is the pair event written before the final answer's
// run: which worker answers, why, and within how many tokens.
const KindFinalAnswer = KindPrefix + "final_answer"

// finalSettings is what a pair keeps of its final-answer option.
type finalSettings struct {
	on     bool
	tokens int64         // the whole token budget; 0 for none
	wall   time.Duration // the whole wall-time budget; 0 for none
}

// normalizeFinal validates the option and returns it with the budget the
// pattern may spend: c.Budget, less the reserve when the option is on.
// c.Budget itself is left as the host gave it.
func (c *Config) normalizeFinal() (finalSettings, Budget, error) {
	work := c.Budget
	switch c.OnLimit {
	case StopAtLimit:
		if c.FinalAnswerReserve != 0 {
			return finalSettings{}, work, bound.Conflicting("pair.final_answer_reserve", "needs on_limit final_answer")
		}
		return finalSettings{}, work, nil
	case AnswerAtLimit:
	default:
		return finalSettings{}, work, bound.Malformedf("pair.on_limit", "must be stop or final_answer")
	}
	r := c.FinalAnswerReserve
	switch {
	case r == 0:
		r = DefaultFinalAnswerReserve
	case !(r > 0 && r <= MaxFinalAnswerReserve):
		return finalSettings{}, work, bound.Malformedf("pair.final_answer_reserve", "must be more than 0 and at most 0.5")
	}
	c.FinalAnswerReserve = r
	f := finalSettings{on: true, tokens: c.Budget.Tokens, wall: c.Budget.WallTime}
	if t := c.Budget.Tokens; t > 0 {
		work.Tokens = t - max(int64(float64(t)*r), 1)
		if work.Tokens < 1 {
			return finalSettings{}, work, bound.Malformedf("pair.final_answer_reserve", "leaves no token for the pair")
		}
	}
	if w := c.Budget.WallTime; w > 0 {
		work.WallTime = w - time.Duration(float64(w)*r)
	}
	// A tool-call budget needs no reserve: the final answer calls none.
	return f, work, nil
}

// finalParts is what a crew keeps of a worker's config to build its
// final-answer engine: the engine config with the pair's relay but
// without the budget decorator, which the final answer's guard replaces.
type finalParts struct {
	role string
	def  engine.Definition
	eng  engine.Config
}

// keepFinal keeps worker i's parts; host is its undecorated provider.
func (c *crew) keepFinal(i int, wc workers.Config, host model.Provider) {
	wc.Engine.Provider = host
	c.final[i] = &finalParts{role: wc.Role, def: wc.Definition, eng: wc.Engine}
}

// finalState is a pair's final answer, while it runs and after.
type finalState struct {
	deadline time.Time // the end of the whole wall-time budget; zero for none

	mu        sync.Mutex
	worker    *workers.Worker // the final answer's worker while it runs
	cancelled bool            // Cancel came: start no final answer, stop a running one
}

// arm notes when the whole wall-time budget ends.
func (f *finalState) arm(s finalSettings) {
	if s.on && s.wall > 0 {
		f.deadline = time.Now().Add(s.wall)
	}
}

// cancel stops the final answer, now or before it starts.
func (f *finalState) cancel() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cancelled = true
	if f.worker != nil {
		_ = f.worker.Shutdown(expired)
	}
}

// hold records the running final answer's worker; false if Cancel came.
func (f *finalState) hold(w *workers.Worker) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.cancelled {
		return false
	}
	f.worker = w
	return true
}

// answerAtLimit runs the final answer when out is a limit the option
// covers, and returns out with the limit's reason unchanged. Cancellation,
// a failed worker and every other outcome pass through untouched.
func (p *Pair) answerAtLimit(out outcome) outcome {
	if !p.cfg.Final.on || (out.reason != ReasonMaxRounds && out.reason != ReasonBudgetExhausted) || p.ctx.Err() != nil {
		return out
	}
	defer func() {
		if recover() != nil {
			out = outcome{reason: ReasonInfrastructure, err: errPanic}
		}
	}()
	w := p.prog.active
	if p.cfg.Pattern == ReviewLoop {
		w = first // the reviewer judges drafts; the writer writes the answer
	}
	parts := p.crew.final[w]
	allowed := int64(0)
	if t := p.cfg.Final.tokens; t > 0 {
		if allowed = t - p.use.tokens.Load(); allowed <= 0 {
			return out // nothing left of the budget, reserve included
		}
	}
	if err := p.tl.emit(FinalAnswer{Worker: parts.role, Reason: out.reason, Limit: out.limit, Tokens: allowed}); err != nil {
		return outcome{reason: ReasonInfrastructure, err: err}
	}
	final, ok := p.runFinal(w, parts, allowed, out)
	if ok {
		p.prog.final = final
		p.prog.finalBy = parts.role
	}
	if f := p.tl.failure.Load(); f != nil {
		return outcome{reason: ReasonInfrastructure, err: *f}
	}
	return out
}

// runFinal builds the final-answer worker, runs it once and closes it. It
// reports the answer, or false when the run did not complete.
func (p *Pair) runFinal(w int, parts *finalParts, allowed int64, out outcome) (message.Message, bool) {
	msg, err := p.finalPrompt(w, out)
	if err != nil {
		return message.Message{}, false
	}
	def, err := engine.NewDefinition(engine.DefinitionConfig{
		Name: parts.def.Name(), Model: parts.def.Model(), System: parts.def.System(), MaxTurns: 1,
	})
	if err != nil {
		return message.Message{}, false
	}
	ec := parts.eng
	ec.Plans = noTools
	ec.Provider = &finalGuard{inner: parts.eng.Provider, p: p, allowed: allowed}
	worker, err := workers.New(workers.Config{Role: parts.role, Definition: def, Engine: ec})
	if err != nil {
		return message.Message{}, false
	}
	fctx, cancel := p.tl.bound()
	defer cancel()
	defer func() { _ = worker.Close(fctx) }()
	if !p.fin.hold(worker) {
		return message.Message{}, false
	}
	ctx := p.ctx
	if !p.fin.deadline.IsZero() {
		var stop context.CancelFunc
		ctx, stop = context.WithDeadline(ctx, p.fin.deadline)
		defer stop()
	}
	r, err := worker.Run(ctx, engine.Input{Message: msg})
	if err != nil {
		return message.Message{}, false
	}
	p.prog.runs++
	res, err := r.Wait(p.tl.appendCtx)
	p.prog.usage = p.prog.usage.Add(res.Usage)
	if p.cfg.Delivery == AfterRun {
		p.copyRun(w, r, res.LastSeq)
	}
	if err != nil || res.Final.Text() == "" {
		return message.Message{}, false
	}
	return res.Final, true
}

// finalPrompt is the final answer's one user message: what the worker was
// last given (or the task), in a review loop its latest draft and the
// review it has not seen, and the request. Whatever does not fit is cut
// with a visible marker.
func (p *Pair) finalPrompt(w int, out outcome) (message.Message, error) {
	why := out.reason.String()
	if out.reason == ReasonBudgetExhausted {
		why = "the " + out.limit.String() + " budget is spent"
	}
	ask := "\n\nThe pair has reached its limit (" + why + "). Give your best final answer to the task now, " +
		"in one reply. No tools are available."
	var b strings.Builder
	room := bound.MaxMessageBytes - len(ask)
	add := func(heading, text string) {
		if text == "" {
			return
		}
		const marker = "\n[cut]"
		if len(heading)+len(text) > room {
			cut := max(room-len(heading)-len(marker), 0)
			for cut > 0 && !utf8.RuneStart(text[cut]) {
				cut--
			}
			if cut == 0 {
				return
			}
			text = text[:cut] + marker
		}
		b.WriteString(heading)
		b.WriteString(text)
		room -= len(heading) + len(text)
	}
	seen := p.prog.active == w
	if seen {
		add("", p.prog.input.Text())
	} else {
		add("", p.task.text)
	}
	if p.cfg.Pattern == ReviewLoop {
		add("\n\nYour latest draft:\n", p.prog.final.Text())
		if !seen {
			add("\n\nThe latest review:\n", p.prog.review.Text())
		}
	}
	b.WriteString(ask)
	return message.User(b.String())
}

// noTools is the plan source of every final answer: one empty plan.
var noTools = func() plan.Source {
	d, err := tool.NewDispatcher(tool.DispatcherConfig{})
	if err != nil {
		panic(err)
	}
	pl, err := plan.New("no-tools", d)
	if err != nil {
		panic(err)
	}
	m, err := plan.NewMemory(pl)
	if err != nil {
		panic(err)
	}
	return m
}()

func failedItem(code, msg string) model.Item {
	it, err := model.Failed(problem.Must(code, msg))
	if err != nil {
		panic(err)
	}
	return it
}

// The items a final answer's stream ends with when the pair refuses it: a
// failed item, so that the run's failure names the problem.
var (
	overReserve = failedItem(CodeFinalAnswerOverReserve, "the final answer used more tokens than the pair kept for it")
	toolCalled  = failedItem(CodeFinalAnswerToolCall, "the final answer asked for a tool; none is allowed")
)

// finalGuard is the final answer's budget decorator, in place of the
// worker's: it meters the pair's tokens as the worker's does, fails the
// operation when it used more than allowed (the rest of the whole budget),
// and fails it at any tool call, before the engine sees the call. Both end
// the stream with a failed item in place of the one refused.
type finalGuard struct {
	inner   model.Provider
	p       *Pair
	allowed int64 // 0: no token budget
}

func (g *finalGuard) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s, err := g.inner.Stream(ctx, req)
	if err != nil || s == nil {
		return s, err
	}
	return &finalStream{inner: s, g: g}, nil
}

type finalStream struct {
	inner model.Stream
	g     *finalGuard
}

func (s *finalStream) Recv() (model.Item, error) {
	it, err := s.inner.Recv()
	if err != nil {
		return it, err
	}
	switch it.Kind() {
	case model.KindToolCall:
		return toolCalled, nil
	case model.KindCompleted:
		used := it.Usage().Total()
		s.g.p.use.tokens.Add(used)
		if s.g.allowed > 0 && used > s.g.allowed {
			return overReserve, nil
		}
	}
	return it, nil
}

func (s *finalStream) Close() error { return s.inner.Close() }

// FinalAnswer is the payload of pair.final_answer: the worker asked for
// the final answer, the limit that ended the pair, and the tokens the
// answer may use (0 when there is no token budget).
type FinalAnswer struct {
	Worker string
	Reason Reason
	Limit  Limit // for ReasonBudgetExhausted
	Tokens int64
}

func (FinalAnswer) Kind() string { return KindFinalAnswer }

func (p FinalAnswer) fields(o *eventlog.Object) {
	o.String(FieldWorker, p.Worker)
	o.String(FieldReason, p.Reason.String())
	if p.Limit != 0 {
		o.String("limit", p.Limit.String())
	}
	o.Int("tokens", p.Tokens)
}

func (p FinalAnswer) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}

func (p FinalAnswer) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

func readFinalAnswer(raw []byte) (eventlog.Payload, error) {
	r := eventlog.ReadObject("payload", raw)
	var p FinalAnswer
	p.Worker = r.String(FieldWorker)
	reason := r.String(FieldReason)
	limit := r.OptionalString("limit")
	p.Tokens = r.Int("tokens")
	if err := r.Close(); err != nil {
		return nil, err
	}
	if err := count64("payload.tokens", p.Tokens); err != nil {
		return nil, err
	}
	var ok bool
	if p.Reason, ok = parseReason(reason); !ok || (p.Reason != ReasonMaxRounds && p.Reason != ReasonBudgetExhausted) {
		return nil, bound.Malformedf("payload.reason", "not a limit reason")
	}
	if limit != "" {
		if p.Limit, ok = parseLimit(limit); !ok {
			return nil, bound.Malformedf("payload.limit", "not a budget limit")
		}
	}
	return p, nil
}
