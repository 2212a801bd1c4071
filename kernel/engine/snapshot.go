package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"slices"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Snapshot format bounds (K29).
const (
	SnapshotVersion  = 1
	MaxSnapshotBytes = 16 << 20
)

var (
	// ErrSnapshotRefused matches every refusal to export a snapshot.
	ErrSnapshotRefused = errors.New("engine: snapshot refused")
	// ErrNotResumable is returned by Resume for a snapshot of a run that
	// has ended; only suspended runs continue.
	ErrNotResumable = errors.New("engine: snapshot is not resumable")
)

// RefusedError says why a snapshot was not exported.
type RefusedError struct{ Reason string }

func (e *RefusedError) Error() string        { return "engine: snapshot refused: " + e.Reason }
func (e *RefusedError) Is(target error) bool { return target == ErrSnapshotRefused }

// Snapshot is a decoded, validated snapshot, for inspection and Resume.
type Snapshot struct {
	runID   id.Run
	status  Status
	def     Definition
	plan    plan.Identity
	st      state
	problem problem.Problem
}

// RunID returns the snapshotted run's ID.
func (s Snapshot) RunID() id.Run { return s.runID }

// Status returns the run's status when it was snapshotted.
func (s Snapshot) Status() Status { return s.status }

// Plan returns the identity of the plan the run used.
func (s Snapshot) Plan() plan.Identity { return s.plan }

// Definition returns the run's definition.
func (s Snapshot) Definition() Definition { return s.def }

// LastSeq returns the run's last event sequence.
func (s Snapshot) LastSeq() uint64 { return s.st.lastSeq }

// Turns returns the completed turns.
func (s Snapshot) Turns() int { return s.st.turns }

// History yields the run's messages.
func (s Snapshot) History() iter.Seq[message.Message] { return slices.Values(s.st.history) }

// Interactions yields the interaction IDs the run has used.
func (s Snapshot) Interactions() iter.Seq[id.Interaction] { return slices.Values(s.st.interactions) }

// Snapshot exports the run. It is allowed only once the run has ended or
// is suspended at a turn boundary, and refused when a mutating tool call
// ended with an uncertain outcome (K29). The same run always encodes to the
// same bytes.
func (r *Run) Snapshot() ([]byte, error) {
	if !r.ended() {
		return nil, &RefusedError{Reason: "the run is active"}
	}
	if r.st.uncertain {
		return nil, &RefusedError{Reason: "a mutating tool call has an uncertain outcome"}
	}
	return encodeSnapshot(r.id, r.status, r.def, r.plan.Identity(), r.st, r.problem)
}

// EncodeSnapshot encodes a decoded snapshot again. A snapshot encodes to
// the bytes its run's Snapshot produced, so decoding and encoding is a
// round trip.
func EncodeSnapshot(s Snapshot) ([]byte, error) {
	if s.runID == "" {
		return nil, bound.Missing("snapshot")
	}
	return encodeSnapshot(s.runID, s.status, s.def, s.plan, s.st, s.problem)
}

type snapDoc struct {
	Version      int          `json:"version"`
	RunID        string       `json:"run_id"`
	Status       string       `json:"status"`
	Definition   snapDef      `json:"definition"`
	Plan         snapPlan     `json:"plan"`
	Turns        int          `json:"turns"`
	Usage        snapUsage    `json:"usage"`
	LastSeq      uint64       `json:"last_seq"`
	History      []snapMsg    `json:"history"`
	Interactions []string     `json:"interactions"`
	Problem      *snapProblem `json:"problem,omitempty"`
}

type snapDef struct {
	Name     string `json:"name"`
	Model    string `json:"model"`
	System   string `json:"system"`
	MaxTurns int    `json:"max_turns"`
}

type snapPlan struct {
	ID          string `json:"id"`
	Fingerprint string `json:"fingerprint"`
}

type snapUsage struct {
	Input  int64 `json:"input"`
	Output int64 `json:"output"`
}

type snapMsg struct {
	Role  string     `json:"role"`
	Parts []snapPart `json:"parts"`
}

type snapPart struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	CallID    string          `json:"call_id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Content   string          `json:"content,omitempty"`
	Problem   *snapProblem    `json:"problem,omitempty"`
}

type snapProblem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func toSnapProblem(p problem.Problem) *snapProblem {
	if p.IsZero() {
		return nil
	}
	return &snapProblem{Code: p.Code(), Message: p.Message()}
}

func encodeSnapshot(runID id.Run, status Status, def Definition, pl plan.Identity, st state, p problem.Problem) ([]byte, error) {
	doc := snapDoc{
		Version:      SnapshotVersion,
		RunID:        string(runID),
		Status:       status.String(),
		Definition:   snapDef{Name: def.name, Model: def.model, System: def.system, MaxTurns: def.maxTurns},
		Plan:         snapPlan{ID: string(pl.ID), Fingerprint: pl.Fingerprint.String()},
		Turns:        st.turns,
		Usage:        snapUsage{Input: st.usage.Input(), Output: st.usage.Output()},
		LastSeq:      st.lastSeq,
		History:      make([]snapMsg, 0, len(st.history)),
		Interactions: make([]string, 0, len(st.interactions)),
		Problem:      toSnapProblem(p),
	}
	for _, m := range st.history {
		sm := snapMsg{Role: m.Role().String(), Parts: make([]snapPart, 0, m.Len())}
		for part := range m.Parts() {
			sm.Parts = append(sm.Parts, toSnapPart(part))
		}
		doc.History = append(doc.History, sm)
	}
	for _, ix := range st.interactions {
		doc.Interactions = append(doc.Interactions, string(ix))
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := bound.Bytes("snapshot", len(b), MaxSnapshotBytes); err != nil {
		return nil, err
	}
	return b, nil
}

func toSnapPart(part message.Part) snapPart {
	switch part.Kind() {
	case message.KindToolCall:
		c, _ := part.Call()
		return snapPart{Type: "tool_call", CallID: string(c.ID()), Name: c.Name(), Arguments: c.Arguments()}
	case message.KindToolResult:
		res, _ := part.Result()
		p, _ := res.Problem()
		return snapPart{Type: "tool_result", CallID: string(res.CallID()), Content: res.Content(), Problem: toSnapProblem(p)}
	}
	return snapPart{Type: "text", Text: part.Text()}
}

// DecodeSnapshot strictly decodes and validates a snapshot: bounded size,
// known version, no unknown fields, no trailing bytes, and every value
// rebuilt through its validating constructor.
func DecodeSnapshot(b []byte) (Snapshot, error) {
	if err := bound.Bytes("snapshot", len(b), MaxSnapshotBytes); err != nil {
		return Snapshot{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc snapDoc
	if err := dec.Decode(&doc); err != nil {
		return Snapshot{}, bound.Malformedf("snapshot", "not a valid snapshot document")
	}
	if _, err := dec.Token(); err != io.EOF {
		return Snapshot{}, bound.Malformedf("snapshot", "trailing data after the document")
	}
	if doc.Version != SnapshotVersion {
		return Snapshot{}, bound.Malformedf("snapshot.version", "unsupported snapshot version")
	}
	var s Snapshot
	var err error
	if s.runID, err = id.Parse[id.Run]("snapshot.run_id", doc.RunID); err != nil {
		return Snapshot{}, err
	}
	switch doc.Status {
	case "completed":
		s.status = Completed
	case "failed":
		s.status = Failed
	case "cancelled":
		s.status = Cancelled
	case "suspended":
		s.status = Suspended
	default:
		return Snapshot{}, bound.Malformedf("snapshot.status", "unknown status")
	}
	if s.def, err = NewDefinition(DefinitionConfig{Name: doc.Definition.Name, Model: doc.Definition.Model,
		System: doc.Definition.System, MaxTurns: doc.Definition.MaxTurns}); err != nil {
		return Snapshot{}, err
	}
	if s.plan.ID, err = plan.ParseID(doc.Plan.ID); err != nil {
		return Snapshot{}, err
	}
	if s.plan.Fingerprint, err = plan.ParseFingerprint(doc.Plan.Fingerprint); err != nil {
		return Snapshot{}, err
	}
	if doc.Turns < 0 || doc.Turns > doc.Definition.MaxTurns {
		return Snapshot{}, bound.Malformedf("snapshot.turns", "out of range")
	}
	s.st.turns = doc.Turns
	if s.st.usage, err = model.NewUsage(doc.Usage.Input, doc.Usage.Output); err != nil {
		return Snapshot{}, err
	}
	s.st.lastSeq = doc.LastSeq
	if doc.LastSeq == 0 {
		return Snapshot{}, bound.Malformedf("snapshot.last_seq", "must be at least 1")
	}
	if len(doc.History) == 0 {
		return Snapshot{}, bound.Missing("snapshot.history")
	}
	if err := bound.Count("snapshot.history", len(doc.History), bound.MaxMessagesPerRequest); err != nil {
		return Snapshot{}, err
	}
	for _, sm := range doc.History {
		m, err := fromSnapMsg(sm)
		if err != nil {
			return Snapshot{}, err
		}
		s.st.history = append(s.st.history, m)
	}
	if s.st.history[0].Role() != message.RoleUser {
		return Snapshot{}, bound.Malformedf("snapshot.history", "must start with a user message")
	}
	// The history must be one the next turn can send: every tool result
	// answers a call of the assistant message before it, at most once.
	// Only a model request knows that rule, so build one.
	if _, err := model.NewRequest(model.RequestConfig{Operation: "snapshot", Model: s.def.model, Messages: s.st.history}); err != nil {
		return Snapshot{}, err
	}
	for _, ix := range doc.Interactions {
		v, err := id.Parse[id.Interaction]("snapshot.interactions", ix)
		if err != nil {
			return Snapshot{}, err
		}
		if slices.Contains(s.st.interactions, v) {
			return Snapshot{}, bound.Malformedf("snapshot.interactions", "duplicate interaction ID")
		}
		s.st.interactions = append(s.st.interactions, v)
	}
	if doc.Problem != nil {
		if s.problem, err = problem.New(doc.Problem.Code, doc.Problem.Message); err != nil {
			return Snapshot{}, err
		}
	}
	// Snapshots are written in one canonical form, so anything else was
	// not written by Snapshot: encoding/json alone would accept keys in
	// another case, duplicate keys and reordered fields.
	canon, err := EncodeSnapshot(s)
	if err != nil {
		return Snapshot{}, err
	}
	if !bytes.Equal(canon, b) {
		return Snapshot{}, bound.Malformedf("snapshot", "not in the canonical form Snapshot writes")
	}
	return s, nil
}

func fromSnapMsg(sm snapMsg) (message.Message, error) {
	role, err := message.ParseRole(sm.Role)
	if err != nil {
		return message.Message{}, err
	}
	if err := bound.Count("snapshot.parts", len(sm.Parts), bound.MaxPartsPerMessage); err != nil {
		return message.Message{}, err
	}
	parts := make([]message.Part, 0, len(sm.Parts))
	for _, sp := range sm.Parts {
		var part message.Part
		switch sp.Type {
		case "text":
			if part, err = message.TextPart(sp.Text); err != nil {
				return message.Message{}, err
			}
		case "tool_call":
			c, err := tool.NewCall(id.Call(sp.CallID), sp.Name, sp.Arguments)
			if err != nil {
				return message.Message{}, err
			}
			part = message.CallPart(c)
		case "tool_result":
			var res tool.Result
			if sp.Problem != nil {
				p, err := problem.New(sp.Problem.Code, sp.Problem.Message)
				if err != nil {
					return message.Message{}, err
				}
				res, err = tool.NewProblemResult(id.Call(sp.CallID), p, sp.Content)
			} else {
				res, err = tool.NewResult(id.Call(sp.CallID), sp.Content)
			}
			if err != nil {
				return message.Message{}, err
			}
			part = message.ResultPart(res)
		default:
			return message.Message{}, bound.Malformedf("snapshot.parts.type", "unknown part type")
		}
		parts = append(parts, part)
	}
	return message.New(role, parts...)
}

// Resume imports a snapshot of a suspended run and continues it. It leases
// the exact plan the run used and checks that plan's fingerprint before it
// does anything else; the resumed run continues the event sequence after
// the snapshot's last one and keeps its used interaction IDs (K29).
func (e *Engine) Resume(ctx context.Context, b []byte) (*Run, error) {
	s, err := DecodeSnapshot(b)
	if err != nil {
		return nil, err
	}
	lease, err := leasePlan(ctx, func(ctx context.Context) (*plan.Lease, error) { return e.cfg.Plans.LeaseExact(ctx, s.plan.ID) })
	if err != nil {
		return nil, err
	}
	refuse := func(err error) (*Run, error) {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.cfg.FinalizeTimeout)
		defer cancel()
		return nil, errors.Join(err, lease.Release(fctx))
	}
	if err := lease.Plan().Matches(s.plan); err != nil {
		return refuse(err)
	}
	if s.status != Suspended {
		return refuse(ErrNotResumable)
	}
	if err := e.checkStart(s.def, s.st.history[0]); err != nil {
		return refuse(err)
	}
	r, err := e.newRun(ctx, s.runID, s.def, lease, s.st)
	if err != nil {
		return nil, err
	}
	go r.loop(false)
	return r, nil
}
