package orchestrator

// The pair timeline's schema, named once. A timeline is a sequence of
// canonical JSON events, {"seq":N,"kind":…,"time":…,"payload":{…}}
// (eventlog.Event), of two sorts:
//
//   - pair events, whose kinds begin with KindPrefix (KindStarted,
//     KindHandoff, KindFinalAnswer and the terminals KindCompleted,
//     KindFailed, KindCancelled), with the payloads Started, HandedOff,
//     FinalAnswer and Ended;
//   - relayed run events, which keep their kernel kind (event.Kinds) and
//     whose payload is the envelope Relayed writes:
//     {FieldWorker:…, FieldRunID:…, FieldRunSeq:N, FieldPayload:{…}},
//     the last holding the kernel payload unchanged.
//
// DecodePayload reads every field into typed values; the names below are
// the ones readers outside this package pick out of a timeline's JSON
// without decoding it whole (the boundary proof, the command line's
// renderer). Packages below this one (store, pairdiff) cannot import it
// and spell the same names; they refer to this schema by name.
const (
	// KindPrefix begins every pair event kind; a kind without it is a
	// relayed run event.
	KindPrefix = "pair."

	// FieldWorker is the role of the worker a relayed event came from;
	// pair.final_answer and the pair terminals use it for the worker
	// concerned.
	FieldWorker = "worker"
	// FieldRunID is the run a relayed event came from; the pair
	// terminals use it for the run concerned.
	FieldRunID = "run_id"
	// FieldRunSeq is a relayed event's sequence in its run's own log.
	FieldRunSeq = "run_seq"
	// FieldPayload holds a relayed event's kernel payload, and is also
	// the name of every event's payload in the timeline's JSON lines.
	FieldPayload = "payload"

	// FieldPairID names the pair in pair.started and the pair terminals.
	FieldPairID = "pair_id"
	// FieldPlanID names the plan the pair leased, in pair.started (and in
	// a relayed run.started, whose kernel payload uses the same name).
	FieldPlanID = "plan_id"
	// FieldReason is why a pair ended (the terminals) or why a final
	// answer was asked for (pair.final_answer).
	FieldReason = "reason"
)
