package orchestrator

import (
	"context"
	"errors"
	"slices"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/workers"
)

// Resume (R3, R4) continues a pair whose recorded timeline has no
// terminal: its process ended mid-pair. It is the one machinery for every
// host that finds such a pair — a command line, a server on restart, a
// job backend whose job was delivered again — and needs only the
// recorded timeline and the pair's Config, whose plan source must still
// hold the exact plan the pair leased.
//
// The pair goes on from its last completed run boundary. Completed runs
// are not run again: the pattern walks past them with their recorded
// answers, and rebuilds each recorded handoff, which must come out as the
// same message (its SHA-256 is checked). A run the process left without
// a terminal is restarted from its input: its model operations that have
// a recorded output (pair.model_output, written when
// TimelineConfig.Journal is set) are answered from the record, and its
// tool calls that have a recorded outcome are answered with that outcome,
// matched by call ID. Since the kernel is deterministic, the restarted
// run asks for the same calls with the same IDs, and nothing that has a
// recorded outcome reaches the model or the tool twice; past the
// recorded part, the run goes on live.
//
// A mutating call that started without a recorded outcome may or may not
// have taken effect: Resume refuses the pair with ReasonUncertainCall,
// naming the call, unless the call is listed in ResumeConfig.Accept (the
// call is then answered as failed, with an uncertain_tool_call problem,
// and never run again) or its tool declares itself idempotent.
//
// The resumed timeline continues the same pair ID and sequence: its first
// new event is pair.resumed, one after the last recorded one.

// ReasonUncertainCall is the ResumeError reason of a pair refused because
// a mutating call started without a recorded outcome, and the problem
// code with which an accepted one is answered.
const ReasonUncertainCall = "uncertain_tool_call"

// ResumeError reasons besides ReasonUncertainCall. Each is a refusal
// before anything was written: the recorded timeline is left as it was.
const (
	// ReasonNotInterrupted: the timeline already has a pair terminal.
	ReasonNotInterrupted = "not_interrupted"
	// ReasonTimelineInvalid: the timeline is not one this Config wrote
	// (another pair, roles or pattern), has a gap, or cannot be read.
	ReasonTimelineInvalid = "timeline_invalid"
	// ReasonPlanUnavailable: the plan source does not hold the recorded
	// plan ID.
	ReasonPlanUnavailable = "plan_unavailable"
	// ReasonPlanChanged: the plan source's plan of that ID has another
	// fingerprint: a tool contract changed.
	ReasonPlanChanged = "plan_changed"
	// ReasonToolMissing: a tool the recorded runs called is not in the
	// plan.
	ReasonToolMissing = "tool_missing"
	// ReasonPluginChanged: a plugin of the recorded plan no longer has
	// its recorded digest. Hosts that know plugin generations report it
	// with this reason; the orchestrator never sees digests.
	ReasonPluginChanged = "plugin_digest_changed"
	// ReasonNotJournaled: a model operation of the interrupted run has a
	// recorded outcome but no recorded output (the pair was played
	// without TimelineConfig.Journal, or the output was too large to
	// journal): restarting the run would ask the model again.
	ReasonNotJournaled = "not_journaled"
	// ReasonDiverged: while walking the recorded part, the pair did not
	// do what the record says (a handoff with another digest, a run of
	// the other worker). The pair ends failed with this as its cause.
	ReasonDiverged = "replay_diverged"
)

var engineFields = [2]string{"pair.first.engine", "pair.second.engine"}

// ErrResume matches every *ResumeError.
var ErrResume = errors.New("orchestrator: resume refused")

// ResumeError is why a pair could not be resumed.
type ResumeError struct {
	Reason string
	// CallID and Tool name the call of a ReasonUncertainCall, and the
	// tool of a ReasonToolMissing.
	CallID id.Call
	Tool   string
	RunID  id.Run
	Err    error
}

func (e *ResumeError) Error() string {
	s := "orchestrator: resume refused: " + e.Reason
	if e.CallID != "" {
		s += ": call " + string(e.CallID)
	}
	if e.Tool != "" {
		s += " (" + e.Tool + ")"
	}
	if e.RunID != "" {
		s += " of run " + string(e.RunID)
	}
	return s
}

func (e *ResumeError) Unwrap() error        { return e.Err }
func (e *ResumeError) Is(target error) bool { return target == ErrResume }

// RecordedEvent is one event of a recorded pair timeline: its sequence,
// its kind and its payload's canonical JSON, as a store holds it.
type RecordedEvent struct {
	Seq     uint64
	Kind    string
	Payload []byte
}

// MaxResumeEvents bounds the recorded timeline Resume reads.
const MaxResumeEvents = 1 << 20

// ResumeConfig is the input to Resume.
type ResumeConfig struct {
	// Pair is the pair's Config as it was first started: the same ID,
	// workers (roles, definitions), pattern, task, policy and limits. Its
	// plan source must hold the recorded plan ID. The workers' ID sources
	// are wrapped so that no new ID repeats a recorded one.
	Pair Config
	// Timeline is the recorded pair timeline, in sequence order from 1.
	Timeline []RecordedEvent
	// Accept lists uncertain calls that a person checked and accepts as
	// failed.
	Accept []id.Call
	// RunLogs are the runs' own logs, when the host recorded them (a store
	// does): a run commits each event to its own log before the timeline
	// relays it, so the log of the interrupted run may hold the start or
	// the outcome of a call that the timeline lacks. Resume reads the
	// interrupted run's log past what the timeline relayed; other logs
	// are not read.
	RunLogs map[id.Run][]RecordedEvent
}

// Resume validates rc, reads the recorded timeline, leases the recorded
// plan and continues the pair on its own goroutine, as Start does. A
// refusal is a *ResumeError and leaves no trace.
func Resume(ctx context.Context, rc ResumeConfig) (*Pair, error) {
	p, err := prepareResume(ctx, rc)
	if err != nil {
		return nil, err
	}
	go p.runResumed()
	return p, nil
}

// RunResumed is Resume with the pair played on the calling goroutine.
func RunResumed(ctx context.Context, rc ResumeConfig) (*Pair, error) {
	p, err := prepareResume(ctx, rc)
	if err != nil {
		return nil, err
	}
	p.runResumed()
	return p, nil
}

// Check reports whether Resume would refuse rc, and why, without starting
// anything: a host can ask before it shows the pair as resuming.
func (rc ResumeConfig) Check(ctx context.Context) error {
	cfg := rc.Pair
	_, _, _, err := rc.read(ctx, &cfg)
	return err
}

// read validates rc and reads what Resume needs from the record: the
// record itself, the settings and task, and the recorded plan with its
// serving dispatcher.
func (rc ResumeConfig) read(ctx context.Context, cfg *Config) (*record, settings, task, error) {
	n, t, err := cfg.normalize()
	if err != nil {
		return nil, n, t, err
	}
	if err := bound.Count("resume.accept", len(rc.Accept), MaxAccepted); err != nil {
		return nil, n, t, err
	}
	rec, err := readRecord(rc.Timeline, t.pairID, n)
	if err != nil {
		return nil, n, t, err
	}
	if o := rec.open; o != nil {
		if err := o.readOwnLog(rc.RunLogs[o.runID], rec); err != nil {
			return nil, n, t, err
		}
	}
	if o := rec.open; o != nil && len(o.unjournaled) > 0 {
		return nil, n, t, &ResumeError{Reason: ReasonNotJournaled, RunID: o.runID}
	}
	if rec.accepted, err = rec.checkUncertain(rc.Accept); err != nil {
		return nil, n, t, err
	}
	if rec.disp, rec.plan, err = rec.leasePlan(ctx, cfg.Plans); err != nil {
		return nil, n, t, err
	}
	return rec, n, t, nil
}

func prepareResume(ctx context.Context, rc ResumeConfig) (*Pair, error) {
	cfg := rc.Pair
	rec, n, t, err := rc.read(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	disp, pl := rec.disp, rec.plan
	disp.accepted = rec.accepted
	src := &servingSource{inner: cfg.Plans, plan: pl}
	cfg.Plans, n.Plans = src, src
	rs := &resumeState{rec: rec, disp: disp, replay: -1}
	for i, wc := range [2]*workers.Config{&cfg.First, &cfg.Second} {
		wc.Engine.Plans = nil
		if wc.Engine.IDs == nil {
			return nil, bound.Missing(engineFields[i] + ".ids")
		}
		wc.Engine.IDs = newResumeIDs(wc.Engine.IDs, rec.resumes+1)
		if rec.open != nil && rec.open.worker == n.Roles[i] {
			if wc.Engine.Provider == nil {
				return nil, bound.Missing(engineFields[i] + ".provider")
			}
			rs.served = &served{inner: wc.Engine.Provider, queue: rec.open.journal()}
			wc.Engine.Provider = rs.served
			rs.replay = i
		}
	}
	p := &Pair{cfg: &n, task: t, crew: new(crew), rs: rs}
	if err := p.crew.build(&cfg, n); err != nil {
		return nil, err
	}
	if rs.replay >= 0 {
		// The restarted run's calls keep the idempotency keys of the
		// interrupted run's: a call run again is the same call.
		p.crew.runs[rs.replay].as = rec.open.runID
	}
	p.tl.after = rec.lastSeq
	if err := p.open(ctx, &cfg.Timeline); err != nil {
		return nil, err
	}
	p.use.tokens.Add(rec.tokens)
	p.use.requested.Add(rec.toolCalls)
	p.tl.toolCalls.Store(rec.toolCalls)
	return p, nil
}

// runResumed plays the rest of the pattern and always finishes.
func (p *Pair) runResumed() { p.finish(p.playResumed()) }

func (p *Pair) playResumed() (out outcome) {
	defer func() {
		if recover() != nil {
			out = outcome{reason: ReasonInfrastructure, err: errPanic}
		}
	}()
	rec, rs := p.rs.rec, p.rs
	ev := Resumed{PairID: p.task.pairID, FromSeq: rec.lastSeq, Resumes: rec.resumes + 1, Boundary: "run"}
	if o := rec.open; o != nil {
		ev.Boundary, ev.Worker, ev.RunID = "replay", o.worker, o.runID
		ev.ServedModel = len(rs.served.queue)
		ev.ServedTools = o.servable(rs.disp.accepted)
		for c := range rs.disp.accepted {
			ev.Accepted = append(ev.Accepted, c)
		}
		slices.Sort(ev.Accepted)
	}
	if err := p.tl.emit(ev); err != nil {
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

// resumeState is what a resumed pair walks past: the recorded runs and
// handoffs, and the parts that serve the interrupted run's outcomes.
type resumeState struct {
	rec         *record
	nextRun     int
	nextHandoff int
	replay      int // the worker whose interrupted run is replayed; -1 for none
	served      *served
	disp        *servingDispatcher
}

// replayedStep is step's part in a resumed pair: the next recorded
// completed run of worker w, walked past without running it. done is false
// once the record holds no further completed run.
func (p *Pair) replayedStep(w int) (f finished, out outcome, ok, done bool) {
	rs := p.rs
	if rs.nextRun >= len(rs.rec.runs) {
		if rs.replay >= 0 && rs.replay != w {
			return f, p.diverged(w, rs.rec.open.runID), false, true
		}
		return f, out, false, false
	}
	r := rs.rec.runs[rs.nextRun]
	rs.nextRun++
	role := p.cfg.Roles[w]
	if r.worker != role {
		return f, p.diverged(w, r.runID), false, true
	}
	p.prog.runs++
	p.prog.usage = p.prog.usage.Add(r.usage)
	switch r.terminal {
	case event.KindRunFailed:
		return f, outcome{reason: ReasonWorkerFailed, worker: role, runID: r.runID, problem: r.problem,
			err: &engine.Failure{Problem: r.problem}}, false, true
	case event.KindRunCancelled:
		return f, outcome{reason: ReasonCancelled}, false, true
	}
	res := engine.Result{Status: engine.Completed, Usage: r.usage, LastSeq: r.lastSeq, Turns: r.turns}
	if r.final != "" {
		m, err := message.Assistant(r.final)
		if err != nil {
			return f, outcome{reason: ReasonInfrastructure, err: err}, false, true
		}
		res.Final = m
	}
	return finished{RunID: r.runID, Result: res}, outcome{}, true, true
}

// afterLiveRun stops serving recorded outcomes once the replayed run has
// ended: every later run is live.
func (p *Pair) afterLiveRun() {
	if rs := p.rs; rs != nil && rs.replay >= 0 {
		rs.replay = -1
		rs.served.stop()
		rs.disp.stop()
	}
}

// replayedHandoff is handoff's part in a resumed pair: a handoff the
// record holds is not written again, and must be the recorded one.
func (p *Pair) replayedHandoff(from int, runID id.Run, prov handoff.Provenance) (out outcome, recorded bool) {
	rs := p.rs
	if rs == nil || rs.nextHandoff >= len(rs.rec.handoffs) {
		return out, false
	}
	h := rs.rec.handoffs[rs.nextHandoff]
	rs.nextHandoff++
	if h.SHA256 != prov.SHA256 || h.From != prov.From || h.To != prov.To || h.FromRunID != prov.RunID {
		return p.diverged(from, runID), true
	}
	return out, true
}

func (p *Pair) diverged(w int, runID id.Run) outcome {
	return outcome{reason: ReasonInfrastructure, worker: p.cfg.Roles[w], runID: runID,
		err: &ResumeError{Reason: ReasonDiverged, RunID: runID}}
}

// record is what Resume reads from a recorded timeline.
type record struct {
	planID      plan.ID
	fingerprint plan.Fingerprint
	lastSeq     uint64
	resumes     int
	runs        []*recordedRun // completed runs the pattern walks past, in order
	open        *recordedRun   // the run without a terminal, if any
	handoffs    []HandedOff
	journal     map[id.Operation]ModelOutput
	tools       map[string]bool // tools the recorded runs called
	tokens      int64
	toolCalls   int64
	accepted    map[id.Call]bool
	disp        *servingDispatcher
	plan        plan.Plan
}

// recordedRun is one run as the timeline recorded it.
type recordedRun struct {
	worker    string
	runID     id.Run
	terminal  string
	final     string
	usage     model.Usage
	turns     int
	problem   problem.Problem
	lastSeq   uint64
	tokens    int64          // of its completed model operations
	toolCalls int64          // tool calls it started
	ops       []id.Operation // model operations in order
	// unjournaled are completed model operations without a recorded
	// output.
	unjournaled []id.Operation
	calls       []id.Call // tool calls in order
	byCall      map[id.Call]recordedCall
	// asked are the run's interaction events, which say whether approval
	// stopped a call before it ran (ReadApprovals).
	asked []eventlog.Payload
	j     map[id.Operation]ModelOutput
}

// journal is the recorded model outputs of the run's operations, in
// order, up to the first operation without one.
func (r *recordedRun) journal() []ModelOutput {
	var out []ModelOutput
	for _, op := range r.ops {
		o, ok := r.j[op]
		if !ok {
			break
		}
		out = append(out, o)
	}
	return out
}

// servable counts the calls whose outcome the replay serves.
func (r *recordedRun) servable(accepted map[id.Call]bool) int {
	n := 0
	for c, rc := range r.byCall {
		if rc.ended || accepted[c] {
			n++
		}
	}
	return n
}

func invalid(why string) error {
	return &ResumeError{Reason: ReasonTimelineInvalid, Err: bound.Malformedf("resume.timeline", why)}
}

// readRecord reads a recorded timeline for the pair with settings n.
func readRecord(evs []RecordedEvent, pairID string, n settings) (*record, error) {
	if len(evs) == 0 {
		return nil, invalid("empty")
	}
	if len(evs) > MaxResumeEvents {
		return nil, invalid("too many events")
	}
	rec := &record{journal: map[id.Operation]ModelOutput{}, tools: map[string]bool{}}
	byRun := map[id.Run]*recordedRun{}
	var order []*recordedRun
	superseded := map[id.Run]bool{}
	for i, e := range evs {
		if e.Seq != uint64(i)+1 {
			return nil, invalid("the sequence has a gap")
		}
		if Terminal(e.Kind) {
			return nil, &ResumeError{Reason: ReasonNotInterrupted}
		}
		pl, err := DecodePayload(e.Kind, e.Payload)
		if err != nil {
			return nil, &ResumeError{Reason: ReasonTimelineInvalid, Err: err}
		}
		if i == 0 {
			s, ok := pl.(Started)
			if !ok {
				return nil, invalid("does not begin with pair.started")
			}
			if s.PairID != pairID || s.First != n.Roles[0] || s.Second != n.Roles[1] || s.Pattern != n.Pattern.String() {
				return nil, invalid("recorded by another pair, roles or pattern")
			}
			rec.planID, rec.fingerprint = plan.ID(s.PlanID), s.PlanFingerprint
			continue
		}
		switch pl := pl.(type) {
		case Started:
			return nil, invalid("a second pair.started")
		case Resumed:
			rec.resumes++
			if pl.RunID != "" {
				superseded[pl.RunID] = true
			}
		case ModelOutput:
			rec.journal[pl.OperationID] = pl
		case HandedOff:
			rec.handoffs = append(rec.handoffs, pl)
		case Relayed:
			r := byRun[pl.RunID()]
			if r == nil {
				r = &recordedRun{worker: pl.Worker(), runID: pl.RunID(), byCall: map[id.Call]recordedCall{}}
				byRun[pl.RunID()] = r
				order = append(order, r)
			}
			r.add(pl, rec)
		}
		rec.lastSeq = e.Seq
	}
	rec.lastSeq = evs[len(evs)-1].Seq
	for _, r := range order {
		switch {
		case superseded[r.runID]:
		case r.terminal != "":
			if rec.open != nil {
				return nil, invalid("a run without a terminal before a later run")
			}
			// The restarted run counts its own again: only the runs
			// walked past count here.
			rec.runs = append(rec.runs, r)
			rec.tokens += r.tokens
			rec.toolCalls += r.toolCalls
		case rec.open != nil:
			return nil, invalid("two runs without a terminal")
		default:
			rec.open = r
		}
		r.j = rec.journal
	}
	return rec, nil
}

// readOwnLog adds what the run's own log recorded after the last event
// the timeline relayed.
func (r *recordedRun) readOwnLog(evs []RecordedEvent, rec *record) error {
	if len(evs) > MaxResumeEvents {
		return invalid("too many events in a run log")
	}
	for _, e := range evs {
		if e.Seq <= r.lastSeq {
			continue
		}
		pl, err := event.DecodePayload(e.Kind, e.Payload)
		if err != nil {
			return &ResumeError{Reason: ReasonTimelineInvalid, RunID: r.runID, Err: err}
		}
		if e.Kind == event.KindRunCompleted || e.Kind == event.KindRunFailed || e.Kind == event.KindRunCancelled {
			// The run ended, but the timeline never heard: it is still
			// restarted, and the calls it recorded are served.
			continue
		}
		r.add(NewRelayed(r.worker, r.runID, e.Seq, pl), rec)
	}
	return nil
}

// add records one relayed event of the run.
func (r *recordedRun) add(pl Relayed, rec *record) {
	r.lastSeq = pl.RunSeq()
	switch e := pl.Payload().(type) {
	case event.ModelStarted:
		r.ops = append(r.ops, e.OperationID)
	case event.ModelCompleted:
		r.tokens += e.InputTokens + e.OutputTokens
		if _, ok := rec.journal[e.OperationID]; !ok {
			r.unjournaled = append(r.unjournaled, e.OperationID)
		}
	case event.InteractionStarted, event.InteractionAnswered, event.InteractionFailed, event.InteractionCancelled:
		if len(r.asked) < MaxResumeEvents {
			r.asked = append(r.asked, e)
		}
	case event.ToolStarted:
		r.toolCalls++
		rec.tools[e.Name] = true
		r.calls = append(r.calls, e.CallID)
		r.byCall[e.CallID] = recordedCall{name: e.Name, effect: e.Effect, replay: e.Replay}
	case event.ToolCompleted:
		c := r.byCall[e.CallID]
		c.ended, c.content, c.problem = true, e.Content, e.Problem
		r.byCall[e.CallID] = c
	case event.ToolFailed:
		c := r.byCall[e.CallID]
		c.ended, c.failed, c.outcome = true, true, e.Outcome
		r.byCall[e.CallID] = c
	case event.ToolCancelled:
		c := r.byCall[e.CallID]
		c.ended, c.canceled = true, true
		r.byCall[e.CallID] = c
	case event.RunCompleted:
		r.terminal, r.final, r.turns = event.KindRunCompleted, e.FinalText, e.Turns
		r.usage, _ = model.NewUsage(e.InputTokens, e.OutputTokens)
	case event.RunFailed:
		r.terminal, r.problem, r.turns = event.KindRunFailed, e.Problem, e.Turns
		r.usage, _ = model.NewUsage(e.InputTokens, e.OutputTokens)
	case event.RunCancelled:
		r.terminal, r.turns = event.KindRunCancelled, e.Turns
		r.usage, _ = model.NewUsage(e.InputTokens, e.OutputTokens)
	}
}

// checkUncertain refuses an interrupted run's mutating call that started
// without a recorded outcome (or ended uncertain), unless it is accepted
// or may run again (R4). It returns the accepted calls.
func (rec *record) checkUncertain(accept []id.Call) (map[id.Call]bool, error) {
	accepted := make(map[id.Call]bool, len(accept))
	for _, c := range accept {
		accepted[c] = false
	}
	if o := rec.open; o != nil {
		// A call whose approval question was never answered (its process
		// stopped while it waited) or was refused has tool.started and no
		// outcome, yet never ran: the approval guard runs after
		// tool.started and before the tool (R2). It is asked again.
		notRun := ReadApprovals(slices.Values(o.asked)).NotRun
		for _, c := range o.calls {
			rc := o.byCall[c]
			uncertain := !rc.ended && !rc.rerunnable() && !notRun[c] || rc.failed && rc.outcome == "uncertain"
			if !uncertain {
				continue
			}
			if _, ok := accepted[c]; !ok {
				return nil, &ResumeError{Reason: ReasonUncertainCall, CallID: c, Tool: rc.name, RunID: o.runID}
			}
			accepted[c] = true
		}
	}
	for c, used := range accepted {
		if !used {
			return nil, &ResumeError{Reason: ReasonUncertainCall, CallID: c,
				Err: bound.Malformedf("resume.accept", "the call is not an uncertain call of the interrupted run")}
		}
	}
	return accepted, nil
}

// leasePlan leases the recorded plan ID from src, checks that every tool
// the record called is still there and that the fingerprint is the
// recorded one, and returns the plan whose dispatcher serves the
// interrupted run's recorded outcomes.
func (rec *record) leasePlan(ctx context.Context, src plan.Source) (*servingDispatcher, plan.Plan, error) {
	l, err := leaseExact(ctx, src, rec.planID)
	if err != nil {
		return nil, plan.Plan{}, &ResumeError{Reason: ReasonPlanUnavailable, Err: err}
	}
	defer l.Release(context.WithoutCancel(ctx))
	pl := l.Plan()
	for name := range rec.tools {
		if _, ok := pl.Lookup(name); !ok {
			return nil, plan.Plan{}, &ResumeError{Reason: ReasonToolMissing, Tool: name}
		}
	}
	if err := pl.Matches(plan.Identity{ID: rec.planID, Fingerprint: rec.fingerprint}); err != nil {
		return nil, plan.Plan{}, &ResumeError{Reason: ReasonPlanChanged, Err: err}
	}
	disp := &servingDispatcher{inner: pl.Dispatcher(), calls: map[id.Call]recordedCall{}}
	if o := rec.open; o != nil {
		for c, rc := range o.byCall {
			disp.calls[c] = rc
		}
	}
	sp, err := plan.New(rec.planID, disp)
	if err != nil {
		return nil, plan.Plan{}, &ResumeError{Reason: ReasonPlanUnavailable, Err: err}
	}
	return disp, sp, nil
}

// leaseExact calls the plan source with its panics contained.
func leaseExact(ctx context.Context, src plan.Source, planID plan.ID) (l *plan.Lease, err error) {
	defer func() {
		if recover() != nil {
			l, err = nil, errPanic
		}
	}()
	l, err = src.LeaseExact(ctx, planID)
	if err == nil && l == nil {
		err = errors.New("orchestrator: plan source returned no lease")
	}
	return l, err
}
