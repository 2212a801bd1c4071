package openai

import (
	"encoding/json"
	"strconv"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// names maps the wire names of renamed tools back to kernel names. Only
// names that contain '.' are renamed, so the table is usually empty.
type names []rename

type rename struct{ wire, kernel string }

// wireName is the name the API sees: OpenAI allows [a-zA-Z0-9_-] only.
func wireName(name string) string {
	if strings.IndexByte(name, '.') < 0 {
		return name
	}
	return strings.ReplaceAll(name, ".", "_")
}

// kernelName maps a name the model used back to the tool it means.
func (ns names) kernelName(wire string) string {
	for _, r := range ns {
		if r.wire == wire {
			return r.kernel
		}
	}
	return wire
}

// params builds the chat request for req.
func (p *Provider) params(req model.Request) (oai.ChatCompletionNewParams, names, error) {
	var ns names
	tools := make([]oai.ChatCompletionToolUnionParam, 0, req.NumTools())
	for d := range req.Tools() {
		w := wireName(d.Name())
		if w != d.Name() {
			ns = append(ns, rename{wire: w, kernel: d.Name()})
		}
		fn, err := functionJSON(w, d)
		if err != nil {
			return oai.ChatCompletionNewParams{}, nil, err
		}
		tools = append(tools, oai.ChatCompletionFunctionTool(param.Override[shared.FunctionDefinitionParam](fn)))
	}
	if err := checkCollisions(req, ns); err != nil {
		return oai.ChatCompletionNewParams{}, nil, err
	}

	msgs := make([]oai.ChatCompletionMessageParamUnion, 0, req.NumMessages()+1)
	if sys := req.System(); sys != "" {
		msgs = append(msgs, oai.SystemMessage(sys))
	}
	for m := range req.Messages() {
		switch m.Role() {
		case message.RoleUser:
			msgs = append(msgs, oai.UserMessage(m.Text()))
		case message.RoleAssistant:
			msgs = append(msgs, assistantMessage(m))
		case message.RoleTool:
			for r := range m.Results() {
				msgs = append(msgs, oai.ToolMessage(resultText(r), string(r.CallID())))
			}
		}
	}

	params := oai.ChatCompletionNewParams{
		Model:         req.Model(),
		Messages:      msgs,
		StreamOptions: oai.ChatCompletionStreamOptionsParam{IncludeUsage: param.NewOpt(true)},
	}
	if len(tools) > 0 {
		params.Tools = tools
	}
	if p.s.hasTemperature {
		params.Temperature = param.NewOpt(p.s.temperature)
	}
	if p.s.maxTokens > 0 {
		if p.s.legacyMaxTokens {
			params.MaxTokens = param.NewOpt(p.s.maxTokens)
		} else {
			params.MaxCompletionTokens = param.NewOpt(p.s.maxTokens)
		}
	}
	return params, ns, nil
}

// functionJSON writes the function definition by hand so that the schema,
// already compact JSON, is sent byte for byte (the client's map type would
// reorder it).
func functionJSON(wire string, d tool.Definition) (json.RawMessage, error) {
	name, err := json.Marshal(wire)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(name)+len(d.Description())+len(d.SchemaString())+48)
	b = append(b, `{"name":`...)
	b = append(b, name...)
	if desc := d.Description(); desc != "" {
		e, err := json.Marshal(desc)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"description":`...)
		b = append(b, e...)
	}
	b = append(b, `,"parameters":`...)
	b = append(b, d.SchemaString()...)
	b = append(b, '}')
	return b, nil
}

// checkCollisions refuses a request in which a renamed tool's wire name is
// also another tool's name, since the model's answer would be ambiguous.
func checkCollisions(req model.Request, ns names) error {
	for i, r := range ns {
		for _, q := range ns[:i] {
			if q.wire == r.wire {
				return bound.Conflicting("request.tools", "two tool names differ only in '.' and '_'")
			}
		}
		j := 0
		for d := range req.Tools() {
			if d.Name() == r.wire {
				return bound.Conflicting("request.tools["+strconv.Itoa(j)+"].name",
					"two tool names differ only in '.' and '_'")
			}
			j++
		}
	}
	return nil
}

func assistantMessage(m message.Message) oai.ChatCompletionMessageParamUnion {
	var a oai.ChatCompletionAssistantMessageParam
	if t := m.Text(); t != "" {
		a.Content.OfString = param.NewOpt(t)
	}
	if n := m.NumCalls(); n > 0 {
		a.ToolCalls = make([]oai.ChatCompletionMessageToolCallUnionParam, 0, n)
		for c := range m.Calls() {
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: string(c.ID()),
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{
						Name:      wireName(c.Name()),
						Arguments: c.ArgumentsString(),
					},
				},
			})
		}
	}
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

// resultText is what the model reads for one tool result. Chat Completions
// has no field for a failed call, so a problem is written into the text.
func resultText(r tool.Result) string {
	p, ok := r.Problem()
	if !ok {
		return r.Content()
	}
	s := "error (" + p.Code() + ")"
	if msg := p.Message(); msg != "" {
		s += ": " + msg
	}
	if c := r.Content(); c != "" {
		s += "\n\n" + c
	}
	return s
}
