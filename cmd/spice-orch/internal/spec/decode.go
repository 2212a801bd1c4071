package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

// Field names, in the order a spec lists them.
var (
	topFields     = []string{"version", "name", "task", "pattern", "workspace", "approve", "workers", "handoff", "limits", "plugins", "mcp_servers"}
	workerFields  = []string{"role", "provider", "model", "system", "max_turns", "script", "openai"}
	openaiFields  = []string{"base_url", "timeout", "temperature", "max_output_tokens"}
	handoffFields = []string{"max_bytes", "over_bound", "task_heading", "done_marker", "headings"}
	limitFields   = []string{"max_rounds", "budget", "on_limit", "final_answer_reserve"}
	budgetFields  = []string{"tokens", "tool_calls", "wall_time"}
)

// DecodeFile reads and decodes the spec at path. A file over MaxBytes is
// refused before it is parsed.
func DecodeFile(path string) (Spec, error) {
	f, err := os.Open(path)
	if err != nil {
		return Spec{}, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return Spec{}, err
	}
	return Decode(path, data)
}

// Decode decodes one spec document strictly and validates it. file names
// the input in errors and anchors a relative workspace. Every error is an
// *Error.
func Decode(file string, data []byte) (Spec, error) {
	d := &decoder{file: file}
	if err := bound.Bytes("spec", len(data), MaxBytes); err != nil {
		return Spec{}, d.bound(nil, "", err)
	}
	if err := d.text(data); err != nil {
		return Spec{}, err
	}
	if isJSON(file, data) {
		// YAML reads JSON, but its syntax errors speak of YAML.
		if err := jsonSyntax(data); err != nil {
			return Spec{}, d.jsonError(data, err)
		}
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Spec{}, d.fail(nil, "", "empty spec")
		}
		return Spec{}, d.syntax(err)
	}
	var more yaml.Node
	if err := dec.Decode(&more); !errors.Is(err, io.EOF) {
		if err != nil {
			return Spec{}, d.syntax(err)
		}
		return Spec{}, d.fail(&more, "", "a spec is one YAML document; found another")
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return Spec{}, d.fail(&doc, "", "empty spec")
	}
	if err := d.plain(&doc); err != nil {
		return Spec{}, err
	}
	s, err := d.spec(doc.Content[0])
	if err != nil {
		return Spec{}, err
	}
	s.File = file
	return s, nil
}

// text refuses bytes that are not UTF-8 and control characters other
// than tab, newline and carriage return, anywhere in the document, at
// their line and column: the YAML parser names neither.
func (d *decoder) text(data []byte) *Error {
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, n := utf8.DecodeRune(data[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return &Error{File: d.file, Line: line, Column: col, Msg: "not valid UTF-8"}
		case r == '\n':
			line, col = line+1, 0
		case r < 0x20 && r != '\t' && r != '\r', r == 0x7f, r >= 0x80 && r < 0xa0:
			return &Error{File: d.file, Line: line, Column: col,
				Msg: fmt.Sprintf("control character %U (only tab, newline and carriage return are allowed)", r)}
		}
		i += n
		col++
	}
	return nil
}

var syntaxLine = regexp.MustCompile(`^yaml: line (\d+): (.*)$`)

// syntax turns a parser error into an *Error with its line. Parser
// messages describe the grammar, not the input.
func (d *decoder) syntax(err error) *Error {
	msg := err.Error()
	if m := syntaxLine.FindStringSubmatch(msg); m != nil {
		line, _ := strconv.Atoi(m[1])
		return &Error{File: d.file, Line: line, Msg: "YAML syntax: " + m[2]}
	}
	return &Error{File: d.file, Msg: "YAML syntax error"}
}

// isJSON reports whether the spec is meant as JSON: a .json file, or a
// document that starts with an object.
func isJSON(file string, data []byte) bool {
	return strings.EqualFold(filepath.Ext(file), ".json") || bytes.HasPrefix(bytes.TrimLeft(data, " \t\r\n"), []byte("{"))
}

// jsonSyntax checks that data is one JSON value.
func jsonSyntax(data []byte) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return &json.SyntaxError{Offset: dec.InputOffset()}
	}
	return nil
}

// jsonError turns a JSON decoding error into an *Error with its line. Only
// the grammar is described, never the input.
func (d *decoder) jsonError(data []byte, err error) *Error {
	var se *json.SyntaxError
	offset := int64(len(data))
	msg := "unexpected end of the document"
	if errors.As(err, &se) {
		offset = se.Offset
		msg = se.Error()
		if msg == "" {
			msg = "more after the JSON value"
		}
		// "invalid character 'x' after ...": leave the character out.
		if rest, ok := strings.CutPrefix(msg, "invalid character '"); ok {
			if i := strings.LastIndex(rest, "' "); i >= 0 {
				msg = "invalid character " + rest[i+2:]
			}
		}
	}
	line := 1 + bytes.Count(data[:min(max(offset, 0), int64(len(data)))], []byte("\n"))
	return &Error{File: d.file, Line: line, Msg: "JSON syntax: " + msg}
}

func (d *decoder) spec(root *yaml.Node) (Spec, error) {
	var s Spec
	top, err := d.object(root, "", topFields...)
	if err != nil {
		return s, err
	}
	if v, err := d.integer(top, "version", 1, 1); err != nil {
		return s, err
	} else if v == 0 && top.has("version") {
		return s, d.fail(top.line("version"), "version", "must be 1")
	}
	if s.Name, err = d.str(top, "name", false, bound.MaxNameBytes); err != nil {
		return s, err
	}
	if s.Task, err = d.str(top, "task", false, bound.MaxMessageBytes); err != nil {
		return s, err
	}
	if top.has("task") && s.Task == "" {
		return s, d.fail(top.line("task"), "task", "must not be empty (leave it out for the default task)")
	}
	p, err := d.enum(top, "pattern", true, string(Relay), string(Review))
	if err != nil {
		return s, err
	}
	s.Pattern = Pattern(p)
	if s.Workspace, err = d.str(top, "workspace", false, 4096); err != nil {
		return s, err
	}
	if top.has("workspace") && s.Workspace == "" {
		return s, d.fail(top.line("workspace"), "workspace", "must not be empty")
	}
	if s.Workspace != "" {
		// A spec written by someone else must not make the tools write
		// anywhere but beside it; another directory is the command
		// line's choice.
		if !filepath.IsLocal(s.Workspace) {
			return s, d.fail(top.line("workspace"), "workspace", errWorkspaceOutside)
		}
		s.WorkspaceLine = top.line("workspace").Line
	}
	if err := d.approve(top, &s); err != nil {
		return s, err
	}
	if !top.has("workers") {
		return s, d.fail(root, "workers", "required: two workers")
	}
	if err := d.workers(top.values["workers"], &s); err != nil {
		return s, err
	}
	if v, ok := top.values["handoff"]; ok {
		if s.Handoff, err = d.handoff(v, s); err != nil {
			return s, err
		}
	}
	if v, ok := top.values["limits"]; ok {
		if s.Limits, err = d.limits(v, s.Pattern); err != nil {
			return s, err
		}
	}
	if v, ok := top.values["plugins"]; ok {
		if s.Plugins, err = d.plugins(v); err != nil {
			return s, err
		}
	}
	if v, ok := top.values["mcp_servers"]; ok {
		if s.MCPServers, err = d.mcpServers(v); err != nil {
			return s, err
		}
	}
	return s, nil
}

func (d *decoder) workers(n *yaml.Node, s *Spec) error {
	items, err := d.list(n, "workers")
	if err != nil {
		return err
	}
	if len(items) != 2 {
		return d.fail(n, "workers", "a pair has exactly two workers, got "+strconv.Itoa(len(items)))
	}
	for i, item := range items {
		if s.Workers[i], err = d.worker(item, "workers["+strconv.Itoa(i)+"]"); err != nil {
			return err
		}
	}
	if s.Workers[0].Role == s.Workers[1].Role {
		o, _ := d.object(items[1], "workers[1]", workerFields...)
		return d.fail(o.line("role"), "workers[1].role", "the two workers need different roles")
	}
	return nil
}

func (d *decoder) worker(n *yaml.Node, path string) (Worker, error) {
	var w Worker
	o, err := d.object(n, path, workerFields...)
	if err != nil {
		return w, err
	}
	if w.Role, err = d.str(o, "role", true, bound.MaxNameBytes); err != nil {
		return w, err
	}
	if err := bound.Name(join(path, "role"), w.Role); err != nil {
		return w, d.bound(o.line("role"), "", err)
	}
	p, err := d.enum(o, "provider", true, string(Scripted), string(OpenAI))
	if err != nil {
		return w, err
	}
	w.Provider = Provider(p)
	if w.Model, err = d.str(o, "model", w.Provider == OpenAI, bound.MaxNameBytes); err != nil {
		return w, err
	}
	if w.Model == "" {
		w.Model = DefaultScriptedModel
	}
	if err := model.CheckModelName(join(path, "model"), w.Model); err != nil {
		return w, d.bound(o.line("model"), "", err)
	}
	if w.System, err = d.str(o, "system", false, bound.MaxSystemPromptBytes); err != nil {
		return w, err
	}
	turns, err := d.integer(o, "max_turns", 1, MaxTurns)
	if err != nil {
		return w, err
	}
	w.MaxTurns = int(turns)
	if w.MaxTurns == 0 {
		w.MaxTurns = DefaultMaxTurns
	}
	switch w.Provider {
	case Scripted:
		if o.has("openai") {
			return w, d.fail(o.values["openai"], join(path, "openai"), "only a worker with provider openai takes openai options")
		}
		if v, ok := o.values["script"]; ok {
			w.Script, w.Calls, err = d.script(v, join(path, "script"))
			return w, err
		}
		builtinWriter, builtinReviewer := scripted.Builtin()
		switch w.Role {
		case scripted.WriterName:
			w.Script, w.Builtin = builtinWriter, true
		case scripted.ReviewerName:
			w.Script, w.Builtin = builtinReviewer, true
		default:
			return w, d.fail(n, join(path, "script"), "required for provider scripted (built-in scripts exist only for the roles writer and reviewer)")
		}
	case OpenAI:
		if o.has("script") {
			return w, d.fail(o.values["script"], join(path, "script"), "only a worker with provider scripted takes a script")
		}
		if v, ok := o.values["openai"]; ok {
			w.OpenAI, err = d.openai(v, join(path, "openai"))
		}
	}
	return w, err
}

func (d *decoder) openai(n *yaml.Node, path string) (OpenAIOptions, error) {
	var opts OpenAIOptions
	o, err := d.object(n, path, openaiFields...)
	if err != nil {
		return opts, err
	}
	if opts.BaseURL, err = d.str(o, "base_url", false, 2048); err != nil {
		return opts, err
	}
	if o.has("base_url") {
		u, err := url.Parse(opts.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return opts, d.fail(o.line("base_url"), join(path, "base_url"), "must be an absolute http or https URL")
		}
		if u.User != nil {
			return opts, d.fail(o.line("base_url"), join(path, "base_url"),
				"must not hold credentials (the key comes from OPENAI_API_KEY)")
		}
		if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.RawFragment != "" {
			return opts, d.fail(o.line("base_url"), join(path, "base_url"),
				"must not have a query string or a fragment")
		}
	}
	if opts.Timeout, err = d.duration(o, "timeout", MaxTimeout); err != nil {
		return opts, err
	}
	if opts.Temperature, err = d.number(o, "temperature", 0, 2); err != nil {
		return opts, err
	}
	tokens, err := d.integer(o, "max_output_tokens", 1, MaxOutputTokens)
	opts.MaxOutputTokens = int(tokens)
	return opts, err
}

func (d *decoder) handoff(n *yaml.Node, s Spec) (Handoff, error) {
	var h Handoff
	o, err := d.object(n, "handoff", handoffFields...)
	if err != nil {
		return h, err
	}
	maxBytes, err := d.integer(o, "max_bytes", 1, bound.MaxMessageBytes)
	if err != nil {
		return h, err
	}
	h.MaxBytes = int(maxBytes)
	over, err := d.enum(o, "over_bound", false, string(OverError), string(OverTruncate))
	if err != nil {
		return h, err
	}
	h.Over = Over(over)
	if h.TaskHeading, err = d.str(o, "task_heading", false, handoff.MaxHeadingBytes); err != nil {
		return h, err
	}
	if h.DoneMarker, err = d.str(o, "done_marker", false, handoff.MaxHeadingBytes); err != nil {
		return h, err
	}
	if v, ok := o.values["headings"]; ok {
		ho, err := d.object(v, "handoff.headings", s.Workers[0].Role, s.Workers[1].Role)
		if err != nil {
			return h, err
		}
		h.Headings = make(map[string]string, 2)
		for _, w := range s.Workers {
			if ho.has(w.Role) {
				if h.Headings[w.Role], err = d.str(ho, w.Role, true, handoff.MaxHeadingBytes); err != nil {
					return h, err
				}
			}
		}
	}
	// The handoff package has the last word on headings and the marker.
	if _, err := handoff.NewPolicy(h.Config()); err != nil {
		line := o.node
		var be *bound.Error
		if errors.As(err, &be) {
			for _, name := range handoffFields {
				if be.Field == "handoff."+name || be.Field == "handoff."+name+"[]" {
					line = o.line(name)
				}
			}
		}
		return h, d.bound(line, "handoff", err)
	}
	return h, nil
}

// Config returns the handoff.Config the policy is built from.
func (h Handoff) Config() handoff.Config {
	c := handoff.Config{MaxBytes: h.MaxBytes, Over: handoff.Reject, TaskHeading: h.TaskHeading,
		DoneMarker: h.DoneMarker, Headings: h.Headings}
	if h.Over == OverTruncate {
		c.Over = handoff.Cut
	}
	return c
}

func (d *decoder) limits(n *yaml.Node, p Pattern) (Limits, error) {
	var l Limits
	o, err := d.object(n, "limits", limitFields...)
	if err != nil {
		return l, err
	}
	rounds, err := d.integer(o, "max_rounds", 1, orchestrator.MaxRounds)
	if err != nil {
		return l, err
	}
	if p == Relay && rounds > 1 {
		return l, d.fail(o.line("max_rounds"), "limits.max_rounds", "a relay has one round; max_rounds applies to pattern review")
	}
	l.MaxRounds = int(rounds)
	on, err := d.enum(o, "on_limit", false, OnLimitStop, OnLimitFinalAnswer)
	if err != nil {
		return l, err
	}
	l.FinalAnswer = on == OnLimitFinalAnswer
	reserve, err := d.number(o, "final_answer_reserve", 0.01, orchestrator.MaxFinalAnswerReserve)
	if err != nil {
		return l, err
	}
	if reserve != nil {
		if !l.FinalAnswer {
			return l, d.fail(o.line("final_answer_reserve"), "limits.final_answer_reserve", "applies only with on_limit: final_answer")
		}
		l.FinalAnswerReserve = *reserve
	}
	v, ok := o.values["budget"]
	if !ok {
		return l, nil
	}
	b, err := d.object(v, "limits.budget", budgetFields...)
	if err != nil {
		return l, err
	}
	if l.Tokens, err = d.integer(b, "tokens", 1, 1<<50); err != nil {
		return l, err
	}
	if l.ToolCalls, err = d.integer(b, "tool_calls", 1, 1<<50); err != nil {
		return l, err
	}
	l.WallTime, err = d.duration(b, "wall_time", MaxTimeout)
	return l, err
}

// approve reads the approval policy: never, mutating, all, or tool names,
// comma-separated.
func (d *decoder) approve(top *object, s *Spec) error {
	v, err := d.str(top, "approve", false, 4096)
	if err != nil || !top.has("approve") {
		return err
	}
	if _, err := orchestrator.ParseApprovalPolicy(v); err != nil {
		return d.fail(top.line("approve"), "approve",
			"want never, mutating, all, or tool names separated by commas ("+err.Error()+")")
	}
	s.Approve = v
	return nil
}
