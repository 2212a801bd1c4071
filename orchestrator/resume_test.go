package orchestrator_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/workers"
)

// requestLog counts model requests by their content, and keeps the
// operation ID each was first sent as.
type requestLog struct {
	mu  sync.Mutex
	ops map[string][]id.Operation
}

func (l *requestLog) add(key string, op id.Operation) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ops == nil {
		l.ops = map[string][]id.Operation{}
	}
	l.ops[key] = append(l.ops[key], op)
}

func (l *requestLog) repeated() map[string][]id.Operation {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string][]id.Operation{}
	for k, ops := range l.ops {
		if len(ops) > 1 {
			out[k] = ops
		}
	}
	return out
}

var lastInt = regexp.MustCompile(`(\d+)\D*$`)

// detProvider answers from the request alone, as a model with
// temperature 0 would: it makes calls mutating calls, one a turn, then
// answers "<word> N", N read off its input. So a pair played again from
// any point asks the same questions and gets the same answers.
type detProvider struct {
	role  string
	word  string
	inc   int
	calls int
	log   *requestLog
}

func (p *detProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	h := sha256.New()
	var first string
	asst := 0
	for m := range req.Messages() {
		if first == "" {
			first = m.Text()
		}
		if m.Role() == message.RoleAssistant {
			asst++
		}
		fmt.Fprintf(h, "%s:%d:%s|", m.Role(), m.NumCalls(), m.Text())
	}
	p.log.add(p.role+":"+fmt.Sprintf("%x", h.Sum(nil)), req.Operation())
	n := 0
	if m := lastInt.FindStringSubmatch(first); m != nil {
		n, _ = strconv.Atoi(m[1])
	}
	var items []model.Item
	if asst < p.calls {
		key := fmt.Sprintf("%s-%d-%d", p.role, n, asst)
		items = []model.Item{enginetest.Call("c-"+key, "write", `{"key":"`+key+`"}`), enginetest.Done(3, 2)}
	} else {
		items = enginetest.Answer(fmt.Sprintf("%s %d", p.word, n+p.inc))
	}
	return enginetest.NewProvider(items).Stream(ctx, req)
}

// effects is the world the write tool changes: how often each key was
// written. dead stops counting (a process that was killed writes
// nothing more).
type effects struct {
	mu     sync.Mutex
	writes map[string]int
	keys   map[string]idempotency.Key // the last key each key was written with
	dead   bool
}

func (e *effects) get() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]int{}
	for k, v := range e.writes {
		out[k] = v
	}
	return out
}

func writeTool(t testing.TB, e *effects, replay tool.Replay) tool.Tool {
	def, err := tool.NewDefinition(tool.DefinitionConfig{Name: "write", Effect: tool.Mutating, Replay: replay})
	require.NoError(t, err)
	return enginetest.Tool{Def: def, Fn: func(ctx context.Context, call tool.Call, _ tool.Reporter) (tool.Result, error) {
		var a struct{ Key string }
		if err := json.Unmarshal(call.Arguments(), &a); err != nil {
			return tool.Result{}, err
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.dead {
			return tool.NewResult(call.ID(), "")
		}
		if e.writes == nil {
			e.writes, e.keys = map[string]int{}, map[string]idempotency.Key{}
		}
		e.writes[a.Key]++
		e.keys[a.Key], _ = idempotency.FromContext(ctx)
		return tool.NewResult(call.ID(), "wrote "+a.Key)
	}}
}

// cutRecorder records timeline events as a store does, until event cut:
// there it stops, as a killed process does, and holds the pair until
// release.
type cutRecorder struct {
	cut     uint64
	reached chan struct{} // closed when the cut event arrives
	release chan struct{}

	mu  sync.Mutex
	evs []orchestrator.RecordedEvent
}

var errKilled = errors.New("killed")

func (r *cutRecorder) Observe(ctx context.Context, e eventlog.Event) error {
	if r.cut != 0 && e.Seq() >= r.cut {
		if e.Seq() == r.cut {
			close(r.reached)
		}
		<-r.release
		return errKilled
	}
	b := e.AppendJSON(nil)
	var env struct {
		Payload json.RawMessage `json:"payload"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return err
	}
	r.mu.Lock()
	r.evs = append(r.evs, orchestrator.RecordedEvent{Seq: e.Seq(), Kind: e.Kind(), Payload: env.Payload})
	r.mu.Unlock()
	return nil
}

func (r *cutRecorder) events() []orchestrator.RecordedEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]orchestrator.RecordedEvent(nil), r.evs...)
}

// durablePair is a review loop of two rounds in which every run makes
// mutating calls: one process's worth of parts over a shared world (the
// plan source, the tool's effects, the request log).
type durablePair struct {
	src    plan.Source
	fx     *effects
	log    *requestLog
	rounds int
}

func newDurablePair(t testing.TB, rounds int, replay tool.Replay) *durablePair {
	fx := &effects{}
	mem, err := enginetest.Plan("plan-1", writeTool(t, fx, replay))
	require.NoError(t, err)
	var log *requestLog
	if _, bench := t.(*testing.B); !bench {
		log = &requestLog{} // a benchmark's would grow without bound
	}
	return &durablePair{src: mem, fx: fx, log: log, rounds: rounds}
}

func (d *durablePair) config(t testing.TB, rec eventlog.Observer) orchestrator.Config {
	clock := &enginetest.Clock{}
	def := func(name string) engine.Definition {
		x, err := engine.NewDefinition(engine.DefinitionConfig{Name: name, Model: "m", System: name, MaxTurns: 8})
		require.NoError(t, err)
		return x
	}
	return orchestrator.Config{
		ID: "pair-1", Plans: d.src, Pattern: orchestrator.ReviewLoop, Task: "Write a line about the sea.",
		MaxRounds: d.rounds,
		First: workers.Config{Role: "writer", Definition: def("writer"), Engine: engine.Config{
			Provider: &detProvider{role: "writer", word: "draft", inc: 1, calls: 3, log: d.log},
			IDs:      &id.Counter{Prefix: "pair-1/writer/"}, Clock: clock}},
		Second: workers.Config{Role: "reviewer", Definition: def("reviewer"), Engine: engine.Config{
			Provider: &detProvider{role: "reviewer", word: "feedback", calls: 1, log: d.log},
			IDs:      &id.Counter{Prefix: "pair-1/reviewer/"}, Clock: clock}},
		Timeline: orchestrator.TimelineConfig{Required: []eventlog.Observer{rec}, Journal: true},
	}
}

// played is what one resumed pair left: the whole timeline and its end.
type played struct {
	evs     []orchestrator.RecordedEvent
	res     orchestrator.Result
	err     error
	refused []*orchestrator.ResumeError
}

// crashAndResume plays the pair until event cut, "kills" it there and
// resumes it from what was recorded, accepting uncertain calls only
// after a refusal that names them.
func crashAndResume(t *testing.T, d *durablePair, cut uint64) played {
	t.Helper()
	crashed := &cutRecorder{cut: cut, reached: make(chan struct{}), release: make(chan struct{})}
	old, err := orchestrator.Start(context.Background(), d.config(t, crashed))
	require.NoError(t, err)
	// The killed process does nothing more: its pair is held at the cut
	// until the resumed one has ended, and then writes nothing.
	defer func() {
		d.fx.mu.Lock()
		d.fx.dead = true
		d.fx.mu.Unlock()
		close(crashed.release)
		_, _ = old.Wait(context.Background())
	}()
	<-crashed.reached
	prefix := crashed.events()
	require.Len(t, prefix, int(cut-1))

	var out played
	var accept []id.Call
	for {
		rec := &cutRecorder{}
		p, err := orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{
			Pair: d.config(t, rec), Timeline: prefix, Accept: accept})
		var re *orchestrator.ResumeError
		if errors.As(err, &re) && re.Reason == orchestrator.ReasonUncertainCall && re.CallID != "" {
			require.NotContains(t, accept, re.CallID)
			out.refused = append(out.refused, re)
			accept = append(accept, re.CallID)
			continue
		}
		require.NoError(t, err)
		out.res, out.err = p.Wait(context.Background())
		out.evs = append(prefix, rec.events()...)
		return out
	}
}

func TestR3_ResumeAfterACrashAtEveryEventRepeatsNothingRecorded(t *testing.T) {
	full := newDurablePair(t, 2, tool.Unsafe)
	whole := &cutRecorder{}
	p, err := orchestrator.Run(context.Background(), full.config(t, whole))
	require.NoError(t, err)
	want, err := p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrMaxRounds)
	n := uint64(len(whole.events()))
	require.Greater(t, n, uint64(40))

	for cut := uint64(2); cut <= n; cut++ {
		t.Run(strconv.FormatUint(cut, 10), func(t *testing.T) {
			d := newDurablePair(t, 2, tool.Unsafe)
			got := crashAndResume(t, d, cut)
			require.ErrorIs(t, got.err, orchestrator.ErrMaxRounds)
			require.Equal(t, want.Final.Text(), got.res.Final.Text())
			requireOneTerminalGapFree(t, got.evs, cut-1)

			// No model operation with a recorded output was asked again.
			journaled := map[id.Operation]bool{}
			for _, e := range got.evs[:cut-1] {
				if e.Kind == orchestrator.KindModelOutput {
					var mo orchestrator.ModelOutput
					require.NoError(t, json.Unmarshal(e.Payload, &mo))
					journaled[mo.OperationID] = true
				}
			}
			for key, ops := range d.log.repeated() {
				require.Len(t, ops, 2, key)
				require.False(t, journaled[ops[0]], "request %s was answered and recorded, and sent again", key)
			}
			// No mutating call with a recorded outcome ran twice, and
			// every call ran unless a person accepted it as failed.
			accepted := map[string]bool{}
			for _, re := range got.refused {
				accepted[strings.TrimPrefix(string(re.CallID), "c-")] = true
			}
			writes := full.fx.get()
			for key := range writes {
				if accepted[key] {
					require.LessOrEqual(t, d.fx.get()[key], 1, key)
					continue
				}
				require.Equal(t, 1, d.fx.get()[key], key)
			}
		})
	}
}

// requireOneTerminalGapFree checks a resumed timeline: sequences 1..N, one
// pair terminal, last, and pair.resumed right after the recorded part.
func requireOneTerminalGapFree(t *testing.T, evs []orchestrator.RecordedEvent, recorded uint64) {
	t.Helper()
	terminals := 0
	for i, e := range evs {
		require.Equal(t, uint64(i+1), e.Seq)
		if orchestrator.Terminal(e.Kind) {
			terminals++
			require.Equal(t, len(evs)-1, i, "the terminal is last")
		}
	}
	require.Equal(t, 1, terminals)
	require.Equal(t, orchestrator.KindResumed, evs[recorded].Kind)
	var r orchestrator.Resumed
	require.NoError(t, json.Unmarshal(evs[recorded].Payload, &r))
	require.Equal(t, recorded, r.FromSeq)
	require.Equal(t, "pair-1", r.PairID)
}

func TestR4_UncertainMutatingCallIsRefusedUntilAccepted(t *testing.T) {
	d := newDurablePair(t, 1, tool.Unsafe)
	whole := &cutRecorder{}
	p, err := orchestrator.Run(context.Background(), d.config(t, whole))
	require.NoError(t, err)
	_, _ = p.Wait(context.Background())
	// The cut just after the first tool.started: the call has no outcome.
	var cut uint64
	for _, e := range whole.events() {
		if e.Kind == "tool.started" {
			cut = e.Seq + 1
			break
		}
	}
	require.NotZero(t, cut)
	prefix := whole.events()[:cut-1]
	d2 := newDurablePair(t, 1, tool.Unsafe)
	_, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: d2.config(t, &cutRecorder{}), Timeline: prefix})
	var re *orchestrator.ResumeError
	require.ErrorAs(t, err, &re)
	require.ErrorIs(t, err, orchestrator.ErrResume)
	require.Equal(t, orchestrator.ReasonUncertainCall, re.Reason)
	require.Equal(t, id.Call("c-writer-0-0"), re.CallID)
	require.Equal(t, "write", re.Tool)
	require.Empty(t, d2.fx.get(), "a refusal runs nothing")

	// Accepted, the call is answered as failed and never run again.
	rec := &cutRecorder{}
	p, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{
		Pair: d2.config(t, rec), Timeline: prefix, Accept: []id.Call{"c-writer-0-0"}})
	require.NoError(t, err)
	_, err = p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrMaxRounds)
	require.Zero(t, d2.fx.get()["writer-0-0"])
	require.Equal(t, 1, d2.fx.get()["writer-0-1"])
	var r orchestrator.Resumed
	require.NoError(t, json.Unmarshal(rec.events()[0].Payload, &r))
	require.Equal(t, []id.Call{"c-writer-0-0"}, r.Accepted)
	found := false
	for _, e := range rec.events() {
		if e.Kind == "tool.completed" && strings.Contains(string(e.Payload), orchestrator.ReasonUncertainCall) {
			found = true
		}
	}
	require.True(t, found, "the accepted call is answered with an uncertain_tool_call problem")

	// A call to an idempotent tool may run again: no refusal.
	d3 := newDurablePair(t, 1, tool.Idempotent)
	whole3 := &cutRecorder{}
	p, err = orchestrator.Run(context.Background(), d3.config(t, whole3))
	require.NoError(t, err)
	_, _ = p.Wait(context.Background())
	d4 := newDurablePair(t, 1, tool.Idempotent)
	p, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{
		Pair: d4.config(t, &cutRecorder{}), Timeline: whole3.events()[:cut-1]})
	require.NoError(t, err)
	_, err = p.Wait(context.Background())
	require.ErrorIs(t, err, orchestrator.ErrMaxRounds)
	require.Equal(t, 1, d4.fx.get()["writer-0-0"])
	// Run again, it is the same call: its idempotency key is the one the
	// interrupted run gave it.
	d4.fx.mu.Lock()
	key := d4.fx.keys["writer-0-0"]
	d4.fx.mu.Unlock()
	require.Equal(t, idempotency.Derive("pair-1", "pair-1/writer/run-1", "c-writer-0-0"), key)
}

func TestR3_ResumeFailsClosedWhenThePlanChanged(t *testing.T) {
	d := newDurablePair(t, 1, tool.Unsafe)
	whole := &cutRecorder{}
	p, err := orchestrator.Run(context.Background(), d.config(t, whole))
	require.NoError(t, err)
	_, _ = p.Wait(context.Background())
	prefix := whole.events()[:10]

	// The same plan ID over a tool with another contract.
	changed := newDurablePair(t, 1, tool.Idempotent)
	_, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: changed.config(t, &cutRecorder{}), Timeline: prefix})
	var re *orchestrator.ResumeError
	require.ErrorAs(t, err, &re)
	require.Equal(t, orchestrator.ReasonPlanChanged, re.Reason)

	// A source without the plan ID.
	other, err := enginetest.Plan("plan-2", writeTool(t, &effects{}, tool.Unsafe))
	require.NoError(t, err)
	gone := newDurablePair(t, 1, tool.Unsafe)
	gone.src = other
	_, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: gone.config(t, &cutRecorder{}), Timeline: prefix})
	require.ErrorAs(t, err, &re)
	require.Equal(t, orchestrator.ReasonPlanUnavailable, re.Reason)

	// A plan without the tool the record called.
	bare, err := enginetest.Plan("plan-1", enginetest.Echo())
	require.NoError(t, err)
	missing := newDurablePair(t, 1, tool.Unsafe)
	missing.src = bare
	_, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: missing.config(t, &cutRecorder{}), Timeline: prefix})
	require.ErrorAs(t, err, &re)
	require.Equal(t, orchestrator.ReasonToolMissing, re.Reason)
	require.Equal(t, "write", re.Tool)

	// A finished pair is not resumed.
	_, err = orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: d.config(t, &cutRecorder{}), Timeline: whole.events()})
	require.ErrorAs(t, err, &re)
	require.Equal(t, orchestrator.ReasonNotInterrupted, re.Reason)
}

// A pair played without the journal cannot restart a run whose model
// answered: that would ask the model again. It resumes at a boundary.
func TestR3_WithoutTheJournalOnlyABoundaryResumes(t *testing.T) {
	d := newDurablePair(t, 1, tool.Idempotent)
	whole := &cutRecorder{}
	cfg := d.config(t, whole)
	cfg.Timeline.Journal = false
	p, err := orchestrator.Run(context.Background(), cfg)
	require.NoError(t, err)
	_, _ = p.Wait(context.Background())
	evs := whole.events()
	var midRun, boundary int
	for i, e := range evs {
		if e.Kind == "model.completed" && midRun == 0 {
			midRun = i + 1
		}
		if e.Kind == orchestrator.KindHandoff {
			boundary = i + 1
		}
	}
	resume := func(n int) error {
		d2 := newDurablePair(t, 1, tool.Idempotent)
		p, err := orchestrator.RunResumed(context.Background(), orchestrator.ResumeConfig{Pair: d2.config(t, &cutRecorder{}), Timeline: evs[:n]})
		if err != nil {
			return err
		}
		_, err = p.Wait(context.Background())
		return err
	}
	var re *orchestrator.ResumeError
	require.ErrorAs(t, resume(midRun), &re)
	require.Equal(t, orchestrator.ReasonNotJournaled, re.Reason)
	require.ErrorIs(t, resume(boundary), orchestrator.ErrMaxRounds)
}
