package scripted_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

func oneStep(st scripted.Step) scripted.Script { return scripted.Script{Steps: []scripted.Step{st}} }

func TestK2_InvalidScriptsAreTypedErrorsNamingTheField(t *testing.T) {
	tooManySteps := make([]scripted.Step, scripted.MaxSteps+1)
	for i := range tooManySteps {
		tooManySteps[i] = scripted.Step{Text: "x"}
	}
	tooManyCalls := make([]scripted.CallSpec, bound.MaxToolCallsPerOperation+1)
	for i := range tooManyCalls {
		tooManyCalls[i] = scripted.CallSpec{Name: "echo"}
	}
	bigArgs := json.RawMessage(`{"a":"` + strings.Repeat("x", bound.MaxToolArgumentsBytes) + `"}`)
	nearlyBigArgs := json.RawMessage(`{"a":"` + strings.Repeat("x", 60<<10) + `"}`)
	cases := []struct {
		name   string
		script scripted.Script
		field  string
		rule   bound.Rule
	}{
		{"no steps", scripted.Script{}, "script.steps", bound.Required},
		{"too many steps", scripted.Script{Steps: tooManySteps}, "script.steps", bound.TooMany},
		{"empty step", oneStep(scripted.Step{Match: "x"}), "script.steps[0].text", bound.Required},
		{"text not UTF-8", oneStep(scripted.Step{Text: "\xff"}), "script.steps[0].text", bound.Malformed},
		{"text too large", oneStep(scripted.Step{Text: strings.Repeat("x", bound.MaxTextPerOperation+1)}), "script.steps[0].text", bound.TooLarge},
		{"too many calls", oneStep(scripted.Step{Calls: tooManyCalls}), "script.steps[0].calls", bound.TooMany},
		{"bad call name", oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "Fs Read"}}}), "script.steps[0].calls[0].name", bound.Malformed},
		{"missing call name", oneStep(scripted.Step{Calls: []scripted.CallSpec{{}}}), "script.steps[0].calls[0].name", bound.Required},
		{"arguments not an object", oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage(`[1]`)}}}), "script.steps[0].calls[0].arguments", bound.Malformed},
		{"arguments not JSON", oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage(`{"a":`)}}}), "script.steps[0].calls[0].arguments", bound.Malformed},
		{"arguments not UTF-8", oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage("{\"a\":\"\xff\"}")}}}), "script.steps[0].calls[0].arguments", bound.Malformed},
		{"arguments too large", oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "echo", Arguments: bigArgs}}}), "script.steps[0].calls[0].arguments", bound.TooLarge},
		{"message too large", oneStep(scripted.Step{Text: strings.Repeat("x", 200<<10), Calls: []scripted.CallSpec{{Name: "echo", Arguments: nearlyBigArgs}}}), "script.steps[0]", bound.TooLarge},
		{"negative input usage", oneStep(scripted.Step{Text: "x", Usage: scripted.Usage{Input: -1}}), "script.steps[0].usage.input", bound.Malformed},
		{"negative output usage", oneStep(scripted.Step{Text: "x", Usage: scripted.Usage{Output: -1}}), "script.steps[0].usage.output", bound.Malformed},
		{"regexp does not compile", oneStep(scripted.Step{Match: "re:(a", Text: "x"}), "script.steps[0].match", bound.Malformed},
		{"empty regexp", oneStep(scripted.Step{Match: "re:", Text: "x"}), "script.steps[0].match", bound.Malformed},
		{"empty negation", oneStep(scripted.Step{Match: "not:", Text: "x"}), "script.steps[0].match", bound.Malformed},
		{"nested negation", oneStep(scripted.Step{Match: "not:not:x", Text: "x"}), "script.steps[0].match", bound.Malformed},
		{"empty literal", oneStep(scripted.Step{Match: "text:", Text: "x"}), "script.steps[0].match", bound.Malformed},
		{"match too large", oneStep(scripted.Step{Match: strings.Repeat("x", scripted.MaxMatchBytes+1), Text: "x"}), "script.steps[0].match", bound.TooLarge},
		{"second step bad", scripted.Script{Steps: []scripted.Step{{Text: "x"}, {}}}, "script.steps[1].text", bound.Required},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := scripted.NewProvider(c.script)
			require.Nil(t, p)
			requireBoundError(t, err, c.field, c.rule)
			requireBoundError(t, c.script.Validate(), c.field, c.rule)
		})
	}
}

func TestK2_ScriptErrorsNeverQuoteTheRejectedValue(t *testing.T) {
	const secret = "sk-live-secret"
	for _, s := range []scripted.Script{
		oneStep(scripted.Step{Match: "re:(" + secret, Text: "x"}),
		oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "Bad" + secret}}}),
		oneStep(scripted.Step{Calls: []scripted.CallSpec{{Name: "echo", Arguments: json.RawMessage(`"` + secret + `"`)}}}),
	} {
		err := s.Validate()
		require.Error(t, err)
		require.NotContains(t, err.Error(), secret)
	}
	_, err := scripted.DecodeScript([]byte(`{"steps":[{"text":"x","usage":{"input":"` + secret + `"}}]}`))
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)
	_, err = scripted.DecodeScript([]byte(`{"steps":[],"` + secret + ` x":1}`))
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)
}

func TestDecodeScript_IsStrict(t *testing.T) {
	s, err := scripted.DecodeScript([]byte(`{"steps":[
		{"match":"re:^go","calls":[{"name":"fs.write","arguments":{"path":"a.md","content":"hi"}}],"usage":{"input":1,"output":2}},
		{"text":"done"}]}`))
	require.NoError(t, err)
	require.Equal(t, scripted.Script{Steps: []scripted.Step{
		{Match: "re:^go", Calls: []scripted.CallSpec{{Name: "fs.write", Arguments: json.RawMessage(`{"path":"a.md","content":"hi"}`)}}, Usage: scripted.Usage{Input: 1, Output: 2}},
		{Text: "done"},
	}}, s)
	require.Equal(t, []string{"fs.write"}, s.ToolNames())

	cases := []struct {
		name, json string
		rule       bound.Rule
		detail     string
	}{
		{"unknown field", `{"steps":[{"text":"x","txet":"y"}]}`, bound.Malformed, `unknown field "txet"`},
		{"wrong type", `{"steps":[{"text":1}]}`, bound.Malformed, "wrong JSON type"},
		{"trailing data", `{"steps":[{"text":"x"}]} {}`, bound.Malformed, "trailing data"},
		{"truncated", `{"steps":[{"text":"x"}`, bound.Malformed, "truncated"},
		{"syntax", `{"steps":[{"text":"x"},]}`, bound.Malformed, "syntax"},
		{"not UTF-8", "{\"steps\":[{\"text\":\"\xff\"}]}", bound.Malformed, "UTF-8"},
		{"too large", `{"steps":[{"text":"` + strings.Repeat("x", scripted.MaxScriptBytes) + `"}]}`, bound.TooLarge, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := scripted.DecodeScript([]byte(c.json))
			requireBoundError(t, err, "script", c.rule)
			require.Contains(t, err.Error(), c.detail)
		})
	}
	// Valid JSON, invalid script: the validation error names the step.
	_, err = scripted.DecodeScript([]byte(`{"steps":[{"match":"x"}]}`))
	requireBoundError(t, err, "script.steps[0].text", bound.Required)
}

func TestScript_JSONRoundTrip(t *testing.T) {
	w, r := scripted.Builtin()
	for _, s := range []scripted.Script{w, r} {
		b, err := json.Marshal(s)
		require.NoError(t, err)
		back, err := scripted.DecodeScript(b)
		require.NoError(t, err)
		again, err := json.Marshal(back)
		require.NoError(t, err)
		require.Equal(t, string(b), string(again))
		require.Len(t, back.Steps, len(s.Steps))
		for i := range s.Steps {
			require.Equal(t, s.Steps[i].Text, back.Steps[i].Text)
			require.Equal(t, s.Steps[i].Match, back.Steps[i].Match)
			for j := range s.Steps[i].Calls {
				require.JSONEq(t, string(s.Steps[i].Calls[j].Arguments), string(back.Steps[i].Calls[j].Arguments))
			}
		}
	}
}
