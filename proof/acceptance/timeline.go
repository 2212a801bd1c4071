package acceptance

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Line is one timeline event as a client reads it: its canonical JSON,
// with the fields the proof looks at decoded.
type Line struct {
	Raw  []byte
	Seq  uint64
	Kind string
	// Pair event payload, or for a relayed run event the relay fields and
	// the run event's own payload (Inner).
	Payload map[string]json.RawMessage
	Worker  string
	RunID   string
	RunSeq  uint64
	Inner   map[string]json.RawMessage
}

// str returns a string field of m, or "".
func str(m map[string]json.RawMessage, k string) string {
	var s string
	_ = json.Unmarshal(m[k], &s)
	return s
}

// maxLines and maxTimelineBytes bound a timeline the proof parses.
const (
	maxLines         = 1 << 16
	maxTimelineBytes = 64 << 20
)

// ParseLines splits JSON lines into events.
func ParseLines(b []byte) ([]Line, error) {
	if len(b) > maxTimelineBytes {
		return nil, fmt.Errorf("a timeline of more than %d bytes", maxTimelineBytes)
	}
	var out []Line
	for raw := range bytes.Lines(b) {
		if len(out) >= maxLines {
			return nil, fmt.Errorf("more than %d events", maxLines)
		}
		raw = bytes.TrimSuffix(raw, []byte("\n"))
		var top struct {
			Seq     uint64                     `json:"seq"`
			Kind    string                     `json:"kind"`
			Payload map[string]json.RawMessage `json:"payload"`
		}
		if err := json.Unmarshal(raw, &top); err != nil {
			return nil, fmt.Errorf("event %d: %w", len(out)+1, err)
		}
		l := Line{Raw: raw, Seq: top.Seq, Kind: top.Kind, Payload: top.Payload}
		if !strings.HasPrefix(l.Kind, orchestrator.KindPrefix) {
			l.Worker, l.RunID = str(top.Payload, orchestrator.FieldWorker), str(top.Payload, orchestrator.FieldRunID)
			_ = json.Unmarshal(top.Payload[orchestrator.FieldRunSeq], &l.RunSeq)
			_ = json.Unmarshal(top.Payload[orchestrator.FieldPayload], &l.Inner)
		}
		out = append(out, l)
	}
	return out, nil
}

// Summary is what CheckTimeline read from a timeline.
type Summary struct {
	Events    int
	Terminal  string   // the pair terminal's kind
	Reason    string   // its reason
	Runs      []string // run IDs in the order they started
	Workers   []string // the worker of each run
	Finals    []string // each completed run's final text, by run
	Handoffs  int
	ToolCalls []string // tool names, in the order started
	Uncertain []string // call IDs whose tool failed uncertain
	// LastRunEnd is the sequence of the last run terminal.
	LastRunEnd uint64
	// RunStarts are the sequences of the run.started events.
	RunStarts []uint64
}

// lifecycle names the ID field of each run event lifecycle.
var lifecycle = map[string]string{
	"run": "run_id", "turn": "turn_id", "model": "operation_id",
	"tool": "operation_id", "interaction": "interaction_id",
}

// CheckTimeline holds a pair timeline to O7 and K15 as a client sees them:
// sequences 1, 2, 3, ... without a gap; pair.started first; exactly one
// pair terminal, last; each run's relayed events in run-sequence order
// without a gap; every started lifecycle (run, turn, model operation, tool
// operation, interaction) with exactly one terminal and nothing of it
// after that terminal; every tool call started once; and no tool started
// again after an uncertain failure of the same tool. It returns what it
// read.
func CheckTimeline(b []byte) (Summary, error) {
	var s Summary
	lines, err := ParseLines(b)
	if err != nil {
		return s, err
	}
	s.Events = len(lines)
	if len(lines) == 0 {
		return s, fmt.Errorf("the timeline is empty")
	}
	if lines[0].Kind != orchestrator.KindStarted {
		return s, fmt.Errorf("the timeline starts with %s, not %s", lines[0].Kind, orchestrator.KindStarted)
	}
	runSeq := make(map[string]uint64)
	open := make(map[string]bool)  // lifecycle key -> started and not ended
	ended := make(map[string]bool) // lifecycle key -> ended
	calls := make(map[string]bool)
	uncertainTools := make(map[string]bool)
	finals := make(map[string]string)
	for i, l := range lines {
		if l.Seq != uint64(i+1) {
			return s, fmt.Errorf("event %d has sequence %d", i+1, l.Seq)
		}
		if orchestrator.Terminal(l.Kind) {
			if s.Terminal != "" {
				return s, fmt.Errorf("a second pair terminal %s at %d after %s", l.Kind, l.Seq, s.Terminal)
			}
			s.Terminal, s.Reason = l.Kind, str(l.Payload, orchestrator.FieldReason)
			if i != len(lines)-1 {
				return s, fmt.Errorf("the pair terminal %s at %d is not the last event (%d follow)", l.Kind, l.Seq, len(lines)-1-i)
			}
			continue
		}
		if l.Kind == orchestrator.KindHandoff {
			s.Handoffs++
			continue
		}
		if l.Kind == orchestrator.KindModelOutput && i != 0 {
			continue // the journal of a model operation: no lifecycle of its own
		}
		if strings.HasPrefix(l.Kind, orchestrator.KindPrefix) {
			if l.Kind != orchestrator.KindStarted || i != 0 {
				return s, fmt.Errorf("unexpected pair event %s at %d", l.Kind, l.Seq)
			}
			continue
		}
		// A relayed run event.
		if l.RunID == "" || l.Worker == "" {
			return s, fmt.Errorf("relayed event %d (%s) names no run or worker", l.Seq, l.Kind)
		}
		if want := runSeq[l.RunID] + 1; l.RunSeq != want {
			return s, fmt.Errorf("run %s: event %d has run sequence %d, want %d", l.RunID, l.Seq, l.RunSeq, want)
		}
		runSeq[l.RunID] = l.RunSeq
		what, verb, _ := strings.Cut(l.Kind, ".")
		field, ok := lifecycle[what]
		if !ok {
			return s, fmt.Errorf("unknown run event kind %s at %d", l.Kind, l.Seq)
		}
		key := what + " " + str(l.Inner, field)
		if what == "run" {
			key = "run " + l.RunID
		}
		switch {
		case verb == "started":
			if open[key] || ended[key] {
				return s, fmt.Errorf("%s started twice (at %d)", key, l.Seq)
			}
			open[key] = true
			if what == "run" {
				s.Runs = append(s.Runs, l.RunID)
				s.Workers = append(s.Workers, l.Worker)
				s.RunStarts = append(s.RunStarts, l.Seq)
			}
			if what == "tool" {
				name, call := str(l.Inner, "name"), str(l.Inner, "call_id")
				if calls[call] {
					return s, fmt.Errorf("tool call %s was started again at %d", call, l.Seq)
				}
				if uncertainTools[name] {
					return s, fmt.Errorf("tool %s started again at %d after an uncertain failure", name, l.Seq)
				}
				calls[call] = true
				s.ToolCalls = append(s.ToolCalls, name)
			}
		case event.Terminal(l.Kind):
			if !open[key] {
				return s, fmt.Errorf("%s at %d ends %s, which is not open", l.Kind, l.Seq, key)
			}
			open[key], ended[key] = false, true
			if what == "run" {
				s.LastRunEnd = l.Seq
				if verb == "completed" {
					finals[l.RunID] = str(l.Inner, "final_text")
				}
			}
			if what == "tool" && verb == "failed" && strings.Contains(string(l.Inner["outcome"]), "uncertain") {
				s.Uncertain = append(s.Uncertain, str(l.Inner, "call_id"))
				uncertainTools[str(l.Inner, "name")] = true
			}
		default: // text deltas, progress: inside an open lifecycle
			if !open[key] {
				return s, fmt.Errorf("%s at %d belongs to %s, which is not open", l.Kind, l.Seq, key)
			}
		}
	}
	if s.Terminal == "" {
		return s, fmt.Errorf("the timeline has no pair terminal")
	}
	for key, o := range open {
		if o {
			return s, fmt.Errorf("%s has no terminal", key)
		}
	}
	for _, r := range s.Runs {
		s.Finals = append(s.Finals, finals[r])
	}
	return s, nil
}
