package acceptance

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// What the reviewer and the writer read when the other hands off: the
// task, then the other's final answer under the heading the pair's review
// loop gives it. The proof states the framing itself, so a message that
// changes by one byte fails the provider part.
var handoffHeadings = map[string]string{"writer": "Answer from writer", "reviewer": "Reviewer feedback"}

// HandoffText is the message a worker receives when from hands off its
// final answer.
func HandoffText(from, answer string) string {
	return "Task:\n" + Task + "\n\n" + handoffHeadings[from] + ":\n" + answer
}

// wireMessage is one message of a chat completions request, normalized:
// text content as one string, tool calls in order.
type wireMessage struct {
	Role       string
	Content    string
	ToolCalls  []WireCall
	ToolCallID string
}

func (m wireMessage) equal(o wireMessage) bool { return reflect.DeepEqual(m, o) }

// decodeMessages reads the messages of a request body.
func decodeMessages(raw []json.RawMessage) ([]wireMessage, error) {
	out := make([]wireMessage, 0, len(raw))
	for i, r := range raw {
		var m struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []struct {
				ID       string `json:"id"`
				Type     string `json:"type"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
			ToolCallID string `json:"tool_call_id"`
		}
		if err := json.Unmarshal(r, &m); err != nil {
			return nil, fmt.Errorf("message %d: %w", i+1, err)
		}
		w := wireMessage{Role: m.Role, ToolCallID: m.ToolCallID}
		switch c := bytes.TrimSpace(m.Content); {
		case len(c) == 0 || string(c) == "null":
		case c[0] == '"':
			if err := json.Unmarshal(c, &w.Content); err != nil {
				return nil, fmt.Errorf("message %d content: %w", i+1, err)
			}
		default:
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if err := json.Unmarshal(c, &parts); err != nil {
				return nil, fmt.Errorf("message %d content: %w", i+1, err)
			}
			for _, p := range parts {
				if p.Type != "text" {
					return nil, fmt.Errorf("message %d has a %q content part", i+1, p.Type)
				}
				w.Content += p.Text
			}
		}
		for _, tc := range m.ToolCalls {
			if tc.Type != "function" {
				return nil, fmt.Errorf("message %d: a tool call of type %q", i+1, tc.Type)
			}
			w.ToolCalls = append(w.ToolCalls, WireCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		out = append(out, w)
	}
	return out, nil
}

// wireTools is what a request must offer for defs: every definition as a
// function tool, in the plan's order, with the name OpenAI allows ('.'
// becomes '_'), its description and its parameter schema.
func wireTools(defs []tool.Definition) ([]any, error) {
	out := make([]any, 0, len(defs))
	for _, d := range defs {
		var schema any
		if err := json.Unmarshal(d.Schema(), &schema); err != nil {
			return nil, fmt.Errorf("the schema of %s: %w", d.Name(), err)
		}
		out = append(out, map[string]any{"type": "function", "function": map[string]any{
			"name": strings.ReplaceAll(d.Name(), ".", "_"), "description": d.Description(), "parameters": schema,
		}})
	}
	return out, nil
}

// resultText is what the model must read of a tool.completed payload:
// its content, or for a model-visible problem "error (code): message",
// a blank line and the content, as the OpenAI-compatible provider
// documents it.
func resultText(p map[string]json.RawMessage) string {
	content := str(p, "content")
	var pr struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if raw, ok := p["problem"]; !ok || json.Unmarshal(raw, &pr) != nil || pr.Code == "" {
		return content
	}
	s := "error (" + pr.Code + ")"
	if pr.Message != "" {
		s += ": " + pr.Message
	}
	if content != "" {
		s += "\n\n" + content
	}
	return s
}

// workerRuns is what the timeline says about one worker's runs: the first
// user message each started from, and the result of every tool call.
type workerRuns struct {
	inputs  []string
	results map[string]string // call ID -> content of tool.completed
}

// conversations reads the timeline for the inputs of each worker's runs.
// The writer's first run starts from the task; every other run from the
// handoff of the other worker's last final answer, which must match the
// size and SHA-256 the pair.handoff event recorded.
func conversations(lines []Line) (map[string]*workerRuns, error) {
	out := map[string]*workerRuns{
		"writer":   {inputs: []string{Task}, results: map[string]string{}},
		"reviewer": {results: map[string]string{}},
	}
	finals := make(map[string]string)
	for _, l := range lines {
		switch {
		case l.Kind == "run.completed":
			finals[l.RunID] = str(l.Inner, "final_text")
		case l.Kind == "tool.completed":
			if w := out[l.Worker]; w != nil {
				w.results[str(l.Inner, "call_id")] = resultText(l.Inner)
			}
		case l.Kind == orchestrator.KindHandoff:
			from, to, run := str(l.Payload, "from"), str(l.Payload, "to"), str(l.Payload, "from_run_id")
			answer, ok := finals[run]
			w := out[to]
			if !ok || w == nil {
				return nil, fmt.Errorf("pair.handoff %d hands %s's run %s to %q: no such completed run or worker", l.Seq, from, run, to)
			}
			text := HandoffText(from, answer)
			sum := sha256.Sum256([]byte(text))
			var size int
			_ = json.Unmarshal(l.Payload["bytes"], &size)
			if got := str(l.Payload, "sha256"); got != hex.EncodeToString(sum[:]) || size != len(text) {
				return nil, fmt.Errorf("pair.handoff %d records a message of %d bytes (SHA-256 %s), not the %d bytes of %q", l.Seq, size, got, len(text), text)
			}
			w.inputs = append(w.inputs, text)
		}
	}
	return out, nil
}

// checkRequests holds every request of both model servers to what the
// pair must send: nothing the server refused; the leased plan's tools; and
// the conversation of the run it belongs to: the worker's system prompt,
// the run's input (the task, or the handoff message byte for byte), then
// for each earlier answer of the run with tool calls, those calls as the
// transcript made them and each call's result as the timeline recorded it.
func checkRequests(p *Played, lines []Line) error {
	convs, err := conversations(lines)
	if err != nil {
		return err
	}
	if len(p.Tools) == 0 {
		return fmt.Errorf("the pair leased no plan with tools (plan %q)", p.Plan.ID)
	}
	tools, err := wireTools(p.Tools)
	if err != nil {
		return err
	}
	systems := [2]string{WriterSystem, ReviewerSystem}
	for i, role := range [2]string{"writer", "reviewer"} {
		exp, conv := p.Expect[i], convs[role]
		run, start := 0, 0 // the run of the next request and its first transcript
		for n, r := range p.Received[i] {
			if r.Refused != "" {
				return fmt.Errorf("%s refused request %d: %s", exp.Name, n+1, r.Refused)
			}
			var body struct {
				Tools    []any             `json:"tools"`
				Messages []json.RawMessage `json:"messages"`
			}
			if err := json.Unmarshal(r.Body, &body); err != nil {
				return fmt.Errorf("%s, request %d: %w", exp.Name, n+1, err)
			}
			if !reflect.DeepEqual(body.Tools, tools) {
				return fmt.Errorf("%s, request %d: it offers %d tools %s, not the %d definitions of the leased plan %s", exp.Name, n+1, len(body.Tools), toolNames(body.Tools), len(tools), p.Plan.ID)
			}
			if run >= len(conv.inputs) {
				return fmt.Errorf("%s, request %d: run %d of the %s started from no task or handoff in the timeline", exp.Name, n+1, run+1, role)
			}
			want := []wireMessage{{Role: "system", Content: systems[i]}, {Role: "user", Content: conv.inputs[run]}}
			for _, t := range p.Transcripts[i][start:n] {
				want = append(want, wireMessage{Role: "assistant", ToolCalls: t.Calls})
				for _, c := range t.Calls {
					res, ok := conv.results[c.ID]
					if !ok {
						return fmt.Errorf("%s, request %d: the timeline has no result of call %s", exp.Name, n+1, c.ID)
					}
					want = append(want, wireMessage{Role: "tool", ToolCallID: c.ID, Content: res})
				}
			}
			got, err := decodeMessages(body.Messages)
			if err != nil {
				return fmt.Errorf("%s, request %d: %w", exp.Name, n+1, err)
			}
			if err := compareMessages(want, got); err != nil {
				return fmt.Errorf("%s, request %d (%s run %d): %w", exp.Name, n+1, role, run+1, err)
			}
			if n < len(p.Transcripts[i]) && len(p.Transcripts[i][n].Calls) == 0 {
				run, start = run+1, n+1
			}
		}
	}
	return nil
}

// compareMessages names the first message of got that is not want's.
func compareMessages(want, got []wireMessage) error {
	what := func(i int) string {
		switch {
		case i == 1:
			return "the run's input (the task or the handoff message)"
		case want[i].Role == "tool":
			return "the result of call " + want[i].ToolCallID
		}
		return "the " + want[i].Role + " message"
	}
	for i := range min(len(want), len(got)) {
		if !want[i].equal(got[i]) {
			return fmt.Errorf("message %d is not %s:\nwant %+q\ngot  %+q", i+1, what(i), want[i], got[i])
		}
	}
	if len(got) != len(want) {
		return fmt.Errorf("%d messages, want %d", len(got), len(want))
	}
	return nil
}

func toolNames(tools []any) string {
	var names []string
	for _, t := range tools {
		m, _ := t.(map[string]any)
		f, _ := m["function"].(map[string]any)
		n, _ := f["name"].(string)
		names = append(names, n)
	}
	return "[" + strings.Join(names, " ") + "]"
}
