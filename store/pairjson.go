package store

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/id"
)

// Pair timeline kinds the store reads by name. The pair timeline's schema
// is defined once, in package orchestrator (schema.go: KindPrefix, the
// Kind* constants and the Field* names); this package sits below it and
// cannot import it, so it spells the same strings here and in pairFields'
// tags. A test in cmd/spice-orch/internal/compose, which may import both,
// fails if the two spellings drift apart. Payloads are read as generic
// JSON, and a field that is missing or of another shape is simply absent.
const (
	kindPairStarted   = "pair.started"
	kindPairCompleted = "pair.completed"
	kindPairFailed    = "pair.failed"
	kindPairCancelled = "pair.cancelled"
	pairPrefix        = "pair."
)

// pairStatus maps a pair terminal kind to its status.
func pairStatus(kind string) (Status, bool) {
	switch kind {
	case kindPairCompleted:
		return StatusCompleted, true
	case kindPairFailed:
		return StatusFailed, true
	case kindPairCancelled:
		return StatusCancelled, true
	}
	return "", false
}

// pairFields are the fields the store reads from any pair timeline
// payload. Each is kept raw and interpreted by the helpers below. The tags
// spell orchestrator's Field* names (FieldPlanID, FieldReason, FieldWorker,
// FieldRunID, FieldRunSeq, FieldPayload); "workers", "limit" and "problem"
// are fields of orchestrator's Started and Ended payloads.
type pairFields struct {
	// pair.started
	PlanID  json.RawMessage `json:"plan_id"`
	Workers json.RawMessage `json:"workers"`
	// pair terminals
	Reason  json.RawMessage `json:"reason"`
	Limit   json.RawMessage `json:"limit"`
	Problem json.RawMessage `json:"problem"`
	// relayed run events; a failed pair's worker
	Worker  json.RawMessage `json:"worker"`
	RunID   json.RawMessage `json:"run_id"`
	RunSeq  json.RawMessage `json:"run_seq"`
	Payload json.RawMessage `json:"payload"`
}

func readPairFields(payload []byte) (pairFields, bool) {
	// The payload is bounded by eventlog.MaxEventBytes before it gets here.
	var f pairFields
	if json.Unmarshal(payload, &f) != nil {
		return pairFields{}, false
	}
	return f, true
}

// jsonString returns raw as a string if it is one.
func jsonString(raw json.RawMessage) string {
	if len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// jsonUint returns raw as an unsigned integer if it is one.
func jsonUint(raw json.RawMessage) uint64 {
	var v uint64
	if len(raw) == 0 || json.Unmarshal(raw, &v) != nil {
		return 0
	}
	return v
}

// workerNames reads "workers" as a list of names: an object of roles
// ({"first":"writer","second":"reviewer"}, in field order), or an array of
// strings or of objects with a "name", "role" or "worker" string.
func workerNames(raw json.RawMessage) []string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil
	}
	var items []json.RawMessage
	switch raw[0] {
	case '{':
		items = objectValues(raw)
	case '[':
		if json.Unmarshal(raw, &items) != nil {
			return nil
		}
	}
	names := make([]string, 0, len(items))
	for _, it := range items {
		if s := jsonString(it); s != "" {
			names = append(names, s)
			continue
		}
		var o struct {
			Name   json.RawMessage `json:"name"`
			Role   json.RawMessage `json:"role"`
			Worker json.RawMessage `json:"worker"`
		}
		if json.Unmarshal(it, &o) != nil {
			continue
		}
		for _, c := range []json.RawMessage{o.Name, o.Role, o.Worker} {
			if s := jsonString(c); s != "" {
				names = append(names, s)
				break
			}
		}
	}
	return names
}

// objectValues returns the values of a JSON object in field order, nil if
// raw is not one.
func objectValues(raw json.RawMessage) []json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var out []json.RawMessage
	for dec.More() {
		if _, err := dec.Token(); err != nil { // the key
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		out = append(out, v)
	}
	return out
}

// reasonText reads a terminal's reason: a string, or an object with a
// "code" (and "message"), followed in parentheses by what else the
// terminal names: the exhausted limit, the failed worker, the problem.
func (f pairFields) reasonText() string {
	reason := jsonString(f.Reason)
	if reason == "" {
		reason = problemText(f.Reason)
	}
	var extra []string
	for _, s := range []string{jsonString(f.Limit), jsonString(f.Worker), problemText(f.Problem)} {
		if s != "" {
			extra = append(extra, s)
		}
	}
	switch {
	case len(extra) == 0:
		return reason
	case reason == "":
		return strings.Join(extra, ", ")
	}
	return reason + " (" + strings.Join(extra, ", ") + ")"
}

// problemText reads {"code":…,"message":…} as "code: message".
func problemText(raw json.RawMessage) string {
	var o struct {
		Code    json.RawMessage `json:"code"`
		Message json.RawMessage `json:"message"`
	}
	if len(raw) == 0 || raw[0] != '{' || json.Unmarshal(raw, &o) != nil {
		return ""
	}
	code, msg := jsonString(o.Code), jsonString(o.Message)
	switch {
	case code != "" && msg != "":
		return code + ": " + msg
	case code != "":
		return code
	}
	return ""
}

// relay is a run event relayed into a pair timeline.
type relay struct {
	Worker  string
	RunID   string
	RunSeq  uint64
	Payload []byte // the run event's own payload, nil when absent
}

// relayOf reads a relayed event's wrapper. It reports false unless the
// payload names a valid run ID.
func (f pairFields) relayOf() (relay, bool) {
	r := relay{Worker: jsonString(f.Worker), RunID: jsonString(f.RunID), RunSeq: jsonUint(f.RunSeq)}
	if id.Check("run_id", r.RunID) != nil {
		return relay{}, false
	}
	if p := bytes.TrimSpace(f.Payload); len(p) > 0 && p[0] == '{' {
		r.Payload = p
	}
	return r, true
}

// isPairKind reports whether kind belongs to the pair timeline itself
// rather than to a relayed run.
func isPairKind(kind string) bool { return strings.HasPrefix(kind, pairPrefix) }
