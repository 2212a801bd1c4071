package openai

import (
	"encoding/json"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/packages/param"
	"github.com/openai/openai-go/v3/shared"

	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// RequestBody is the body Stream sends for req.
func RequestBody(p *Provider, req model.Request) ([]byte, error) {
	b, _, err := p.requestBody(req)
	return b, err
}

// LibraryRequestBody is the body the client library's own params encoding
// sends for req (ChatCompletionNewParams, with "stream": true set as
// NewStreaming sets it): the reference RequestBody is held to.
func LibraryRequestBody(p *Provider, req model.Request) ([]byte, error) {
	params, err := p.libraryParams(req)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	var body map[string]json.RawMessage
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	body["stream"] = json.RawMessage("true")
	return json.Marshal(body)
}

// libraryParams maps req onto the library's params type, field by field,
// as the provider did before it wrote the body itself.
func (p *Provider) libraryParams(req model.Request) (oai.ChatCompletionNewParams, error) {
	var ns names
	tools := make([]oai.ChatCompletionToolUnionParam, 0, req.NumTools())
	for d := range req.Tools() {
		w := wireName(d.Name())
		if w != d.Name() {
			ns = append(ns, rename{wire: w, kernel: d.Name()})
		}
		fn := shared.FunctionDefinitionParam{Name: w, Parameters: shared.FunctionParameters{}}
		if err := json.Unmarshal([]byte(d.SchemaString()), &fn.Parameters); err != nil {
			return oai.ChatCompletionNewParams{}, err
		}
		if desc := d.Description(); desc != "" {
			fn.Description = param.NewOpt(desc)
		}
		tools = append(tools, oai.ChatCompletionFunctionTool(fn))
	}
	if err := checkCollisions(req, ns); err != nil {
		return oai.ChatCompletionNewParams{}, err
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
			msgs = append(msgs, libraryAssistant(m))
		case message.RoleTool:
			for r := range m.Results() {
				msgs = append(msgs, oai.ToolMessage(libraryResultText(r), string(r.CallID())))
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
	return params, nil
}

func libraryAssistant(m message.Message) oai.ChatCompletionMessageParamUnion {
	var a oai.ChatCompletionAssistantMessageParam
	if t := m.Text(); t != "" {
		a.Content.OfString = param.NewOpt(t)
	}
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
	return oai.ChatCompletionMessageParamUnion{OfAssistant: &a}
}

func libraryResultText(r tool.Result) string {
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
