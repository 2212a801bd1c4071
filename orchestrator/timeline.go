package orchestrator

import (
	"crypto/sha256"
	"encoding/hex"
	"iter"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Pair event kinds (O7). They are defined here, not in the kernel; relayed
// run events keep their kernel kinds (kernel/event). See schema.go.
const (
	KindStarted   = KindPrefix + "started"
	KindHandoff   = KindPrefix + "handoff"
	KindCompleted = KindPrefix + "completed"
	KindFailed    = KindPrefix + "failed"
	KindCancelled = KindPrefix + "cancelled"
)

var kinds = [...]string{KindStarted, KindHandoff, KindFinalAnswer, KindCompleted, KindFailed, KindCancelled, KindResumed, KindModelOutput}

// Kinds yields the pair event kinds in a fixed order. A timeline also holds
// every kernel run event kind (event.Kinds), relayed.
func Kinds() iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, k := range kinds {
			if !yield(k) {
				return
			}
		}
	}
}

// Terminal reports whether kind is a pair terminal.
func Terminal(kind string) bool {
	return kind == KindCompleted || kind == KindFailed || kind == KindCancelled
}

// Payloads follow kernel/event: fields listed once, in fields, and
// AppendJSON and EncodedLen call it directly (an interface or generic
// helper would move the payload to the heap on every append).

// Started is the payload of pair.started: the pair, its leased plan and
// its workers' roles.
type Started struct {
	PairID          string
	PlanID          string
	PlanFingerprint plan.Fingerprint // encoded in hex
	Pattern         string           // "relay" or "review_loop"
	First, Second   string           // the workers' roles
}

func (Started) Kind() string { return KindStarted }

// hexLen is how long a SHA-256 (a plan fingerprint or a handoff digest)
// is in hex. Hex digits never need escaping, so measuring adds it to the
// length of the payload with an empty digest instead of building or
// scanning the digits: they are only built when the event is encoded.
const hexLen = 2 * sha256.Size

func (p Started) fields(o *eventlog.Object, fingerprint string) {
	o.String(FieldPairID, p.PairID)
	o.String(FieldPlanID, p.PlanID)
	o.String("plan_fingerprint", fingerprint)
	o.String("pattern", p.Pattern)
	o.Begin("workers")
	o.String("first", p.First)
	o.String("second", p.Second)
	o.End()
}

func (p Started) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o, p.PlanFingerprint.String())
	return o.End()
}

func (p Started) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o, "")
	return o.Len() + hexLen
}

// HandedOff is the payload of pair.handoff: the provenance of one handoff
// (handoff.Provenance), recorded here and never in a kernel message (O3).
type HandedOff struct {
	Round       int
	From, To    string
	FromRunID   id.Run
	LastSeq     uint64            // the last sequence of the run the answer came from
	SHA256      [sha256.Size]byte // digest of the message content, encoded in hex
	Bytes       int               // size of the message content
	AnswerBytes int               // size of the answer before framing and cutting
	Cut         bool
}

func (HandedOff) Kind() string { return KindHandoff }

func (p HandedOff) fields(o *eventlog.Object, digest string) {
	o.Int("round", int64(p.Round))
	o.String("from", p.From)
	o.String("to", p.To)
	o.String("from_run_id", string(p.FromRunID))
	o.Uint("last_seq", p.LastSeq)
	o.String("sha256", digest)
	o.Int("bytes", int64(p.Bytes))
	o.Int("answer_bytes", int64(p.AnswerBytes))
	o.Bool("cut", p.Cut)
}

func (p HandedOff) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o, hex.EncodeToString(p.SHA256[:]))
	return o.End()
}

func (p HandedOff) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o, "")
	return o.Len() + hexLen
}

// Ended is the payload of the pair terminal: pair.completed, pair.failed
// or pair.cancelled, as its Reason says.
type Ended struct {
	PairID       string
	Reason       Reason
	Limit        Limit // for ReasonBudgetExhausted
	Rounds       int
	Runs         int
	InputTokens  int64
	OutputTokens int64
	ToolCalls    int64
	Worker       string          // optional: the worker that failed
	RunID        id.Run          // optional: its run
	Problem      problem.Problem // optional: the run's problem
	FinalAnswer  string          // optional: the worker whose final answer at the limit is the result
}

// Kind returns the terminal kind for p.Reason.
func (p Ended) Kind() string {
	switch {
	case p.Reason.Succeeded():
		return KindCompleted
	case p.Reason == ReasonCancelled:
		return KindCancelled
	}
	return KindFailed
}

func (p Ended) fields(o *eventlog.Object) {
	o.String(FieldPairID, p.PairID)
	o.String(FieldReason, p.Reason.String())
	if p.Limit != 0 {
		o.String("limit", p.Limit.String())
	}
	o.Int("rounds", int64(p.Rounds))
	o.Int("runs", int64(p.Runs))
	o.Int("input_tokens", p.InputTokens)
	o.Int("output_tokens", p.OutputTokens)
	o.Int("tool_calls", p.ToolCalls)
	o.OptionalString(FieldWorker, p.Worker)
	o.OptionalString(FieldRunID, string(p.RunID))
	if !p.Problem.IsZero() {
		o.Begin("problem")
		o.String("code", p.Problem.Code())
		o.OptionalString("message", p.Problem.Message())
		o.End()
	}
	o.OptionalString("final_answer", p.FinalAnswer)
}

func (p Ended) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}

func (p Ended) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

// Relayed is the payload of a worker's run event in the pair timeline. The
// timeline event keeps the kernel kind ("run.started", "tool.completed",
// ...) and Payload is the kernel payload itself, unchanged and encoded
// lazily: {"worker":…,"run_id":…,"run_seq":N,"payload":{…}}.
//
// Relayed is an immutable value.
type Relayed struct{ r *relayed } // a slot of relayMemory (relay.go)

// NewRelayed returns the relayed form of a run event, for hosts that
// rebuild a timeline from stored events.
func NewRelayed(worker string, runID id.Run, runSeq uint64, payload eventlog.Payload) Relayed {
	return Relayed{&relayed{head: &relayHead{worker: &worker, runID: runID}, runSeq: runSeq, payload: payload}}
}

// Worker returns the role of the worker whose run wrote the event.
func (p Relayed) Worker() string {
	if p.r == nil || p.r.head == nil || p.r.head.worker == nil {
		return ""
	}
	return *p.r.head.worker
}

// RunID returns the run.
func (p Relayed) RunID() id.Run {
	if p.r == nil || p.r.head == nil {
		return ""
	}
	return p.r.head.runID
}

// RunSeq returns the event's sequence in its run's own log.
func (p Relayed) RunSeq() uint64 {
	if p.r == nil {
		return 0
	}
	return p.r.runSeq
}

// Payload returns the kernel payload (a kernel/event type for events
// relayed from a run; whatever NewRelayed was given otherwise).
func (p Relayed) Payload() eventlog.Payload {
	if p.r == nil {
		return nil
	}
	return p.r.payload
}

const (
	relayWorker  = `{"` + FieldWorker + `":`
	relayRunID   = `,"` + FieldRunID + `":`
	relayRunSeq  = `,"` + FieldRunSeq + `":`
	relayPayload = `,"` + FieldPayload + `":`
	relayFixed   = len(relayWorker) + len(relayRunID) + len(relayRunSeq) + len(relayPayload) + 1
)

// AppendJSON writes the envelope by hand: eventlog.Object has no field for
// a nested Payload, and encoding it to a Raw first would allocate.
func (p Relayed) AppendJSON(dst []byte) []byte {
	dst = append(dst, relayWorker...)
	dst = eventlog.AppendString(dst, p.Worker())
	dst = append(dst, relayRunID...)
	dst = eventlog.AppendString(dst, string(p.RunID()))
	dst = append(dst, relayRunSeq...)
	dst = eventlog.AppendUint(dst, p.RunSeq())
	dst = append(dst, relayPayload...)
	if pl := p.Payload(); pl == nil {
		dst = append(dst, "{}"...)
	} else {
		dst = pl.AppendJSON(dst)
	}
	return append(dst, '}')
}

func (p Relayed) EncodedLen() int {
	if p.r != nil && p.r.size > 0 {
		return int(p.r.size) // measured when relayed (relayMemory.relayed)
	}
	n := 2
	if pl := p.Payload(); pl != nil {
		n = pl.EncodedLen()
	}
	return relayedFixed(p.Worker(), p.RunID()) + eventlog.UintLen(p.RunSeq()) + n
}

// relayedFixed is the encoded length of a Relayed without its run sequence
// and payload.
func relayedFixed(worker string, run id.Run) int {
	return relayFixed + eventlog.StringLen(worker) + eventlog.StringLen(string(run))
}
