package spec_test

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

// minimal is a valid spec the error cases below edit line by line.
const minimal = `version: 1
pattern: review
workers:
  - role: writer
    provider: scripted
  - role: reviewer
    provider: scripted
`

func TestExamplesDecode(t *testing.T) {
	s, err := spec.DecodeFile("../../../../examples/review-pair.yaml")
	require.NoError(t, err)
	require.Equal(t, spec.Review, s.Pattern)
	require.Equal(t, "writer", s.Workers[0].Role)
	require.Equal(t, spec.Scripted, s.Workers[1].Provider)
	require.Len(t, s.Workers[0].Script.Steps, 4)
	require.False(t, s.Workers[0].Builtin)
	require.Equal(t, 16384, s.Handoff.MaxBytes)
	require.Equal(t, spec.OverError, s.Handoff.Over)
	require.Equal(t, "Reviewer feedback", s.Handoff.Headings["reviewer"])
	require.Equal(t, spec.Limits{MaxRounds: 3, Tokens: 20000, ToolCalls: 20, WallTime: time.Minute}, s.Limits)
	require.JSONEq(t, `{"path":"NOTES.md"}`, string(s.Workers[1].Script.Steps[0].Calls[0].Arguments))

	o, err := spec.DecodeFile("../../../../examples/openai-pair.yaml")
	require.NoError(t, err)
	require.Equal(t, spec.OpenAI, o.Workers[0].Provider)
	require.Equal(t, "gpt-4o-mini", o.Workers[0].Model)
	require.Equal(t, 2*time.Minute, o.Workers[0].OpenAI.Timeout)
	require.InDelta(t, 0.3, *o.Workers[0].OpenAI.Temperature, 1e-9)
	require.Equal(t, 800, o.Workers[0].OpenAI.MaxOutputTokens)
	require.Empty(t, o.Workers[0].OpenAI.BaseURL, "the example leaves the server to OPENAI_BASE_URL")
	require.Equal(t, spec.OverTruncate, o.Handoff.Over)
}

func TestDefaultsAndBuiltinScripts(t *testing.T) {
	s, err := spec.Decode("min.yaml", []byte(minimal))
	require.NoError(t, err)
	require.Equal(t, "min.yaml", s.File)
	for _, w := range s.Workers {
		require.True(t, w.Builtin, "scripted writer and reviewer without scripts use the built-in ones")
		require.Equal(t, spec.DefaultScriptedModel, w.Model)
		require.Equal(t, spec.DefaultMaxTurns, w.MaxTurns)
		require.NoError(t, w.Script.Validate())
	}
	require.Equal(t, spec.Limits{}, s.Limits)
	require.Empty(t, s.Task)
}

// The built-in pair must end approved under the handoff policy: only the
// reviewer's last answer holds a line that is exactly the done marker.
func TestBuiltinReviewerApprovesOnlyAtTheEnd(t *testing.T) {
	s := spec.Builtin()
	policy, err := handoff.NewPolicy(s.Handoff.Config())
	require.NoError(t, err)
	for _, w := range s.Workers {
		for i, st := range w.Script.Steps {
			if st.Text == "" {
				continue
			}
			m, err := message.Assistant(st.Text)
			require.NoError(t, err)
			last := w.Role == scripted.ReviewerName && i == len(w.Script.Steps)-1
			require.Equal(t, last, policy.Done(m), "%s step %d", w.Role, i)
		}
	}
	require.Equal(t, spec.Review, s.Pattern)
	require.Equal(t, spec.DefaultTask, s.Task)
}

func TestJSONSpecsDecodeLikeYAML(t *testing.T) {
	js := `{
  "pattern": "relay",
  "workers": [
    {"role": "writer", "provider": "scripted", "max_turns": 3},
    {"role": "critic", "provider": "scripted",
     "script": [{"text": "Fine.", "usage": {"input": 1, "output": 2}}]}
  ]
}`
	s, err := spec.Decode("p.json", []byte(js))
	require.NoError(t, err)
	require.Equal(t, spec.Relay, s.Pattern)
	require.Equal(t, 3, s.Workers[0].MaxTurns)
	require.Equal(t, "Fine.", s.Workers[1].Script.Steps[0].Text)
	require.Equal(t, int64(2), s.Workers[1].Script.Steps[0].Usage.Output)

	_, err = spec.Decode("p.json", []byte(strings.Replace(js, `"max_turns": 3`, `"max_turns": "3"`, 1)))
	requireSpecError(t, err, "p.json:4: workers[0].max_turns: want an integer, got a string")
}

func TestScriptArgumentsBecomeCompactJSONInWrittenOrder(t *testing.T) {
	doc := minimal[:strings.Index(minimal, "  - role: reviewer")] + `    script:
      - calls:
          - name: fs.write
            arguments:
              path: a.md
              content: "x: \"y\"\n"
              n: 3
              f: 1.5
              ok: true
              none: null
              list: [1, two, {k: v}]
  - role: reviewer
    provider: scripted
`
	s, err := spec.Decode("a.yaml", []byte(doc))
	require.NoError(t, err)
	require.Equal(t, `{"path":"a.md","content":"x: \"y\"\n","n":3,"f":1.5,"ok":true,"none":null,"list":[1,"two",{"k":"v"}]}`,
		string(s.Workers[0].Script.Steps[0].Calls[0].Arguments))
}

func requireSpecError(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err)
	var se *spec.Error
	require.True(t, errors.As(err, &se), "%T: %v", err, err)
	require.ErrorIs(t, err, spec.ErrInvalid)
	require.Equal(t, want, err.Error())
}

// Every mistake is an *Error naming the file, the line and the field.
func TestDecodeErrorsNameFileLineAndField(t *testing.T) {
	worker0 := func(extra string) string {
		return strings.Replace(minimal, "    provider: scripted\n  - role: reviewer", "    provider: scripted\n"+extra+"  - role: reviewer", 1)
	}
	cases := map[string]struct{ doc, want string }{
		"unknown top field": {minimal + "colour: red\n",
			`s.yaml:8: unknown field "colour" (known: version, name, task, pattern, workspace, approve, workers, handoff, limits, plugins, mcp_servers)`},
		"unknown worker field": {worker0("    temperature: 1\n"),
			`s.yaml:6: workers[0]: unknown field "temperature" (known: role, provider, model, system, max_turns, script, openai)`},
		"a value in a key is not echoed": {minimal + "sk-abc.def/ghi: 1\n", `s.yaml:8: unknown field (not a field name) (known: version, name, task, pattern, workspace, approve, workers, handoff, limits, plugins, mcp_servers)`},
		"wrong type":                     {worker0("    max_turns: many\n"), "s.yaml:6: workers[0].max_turns: want an integer, got a string"},
		"turns too low":                  {worker0("    max_turns: 0\n"), "s.yaml:6: workers[0].max_turns: must be between 1 and 64"},
		"turns too high":                 {worker0("    max_turns: 65\n"), "s.yaml:6: workers[0].max_turns: must be between 1 and 64"},
		"huge integer":                   {worker0("    max_turns: 99999999999999999999\n"), "s.yaml:6: workers[0].max_turns: too large for an integer: must be between 1 and 64"},
		"system not text":                {worker0("    system: [a]\n"), "s.yaml:6: workers[0].system: want a string, got a list"},
		"bad role": {strings.Replace(minimal, "role: writer", "role: Writer One", 1),
			"s.yaml:4: workers[0].role: malformed: must start with a lower-case letter"},
		"same roles": {strings.Replace(minimal, "role: reviewer", "role: writer", 1),
			"s.yaml:6: workers[1].role: the two workers need different roles"},
		"three workers":   {minimal + "  - role: editor\n    provider: scripted\n", "s.yaml:4: workers: a pair has exactly two workers, got 3"},
		"workers mapping": {"pattern: relay\nworkers: {}\n", "s.yaml:2: workers: want a list, got a mapping"},
		"no workers":      {"pattern: relay\n", "s.yaml:1: workers: required: two workers"},
		"no pattern":      {strings.Replace(minimal, "pattern: review\n", "", 1), "s.yaml:1: pattern: required"},
		"bad pattern":     {strings.Replace(minimal, "pattern: review", "pattern: swarm", 1), "s.yaml:2: pattern: must be one of relay, review"},
		"bad provider": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: claude\n  - role: reviewer", 1),
			"s.yaml:5: workers[0].provider: must be one of scripted, openai"},
		"openai without model": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: openai\n  - role: reviewer", 1),
			"s.yaml:4: workers[0].model: required"},
		"openai options on scripted": {worker0("    openai: {timeout: 1m}\n"), "s.yaml:6: workers[0].openai: only a worker with provider openai takes openai options"},
		"no script for a role without one": {strings.Replace(minimal, "role: reviewer", "role: critic", 1),
			"s.yaml:6: workers[1].script: required for provider scripted (built-in scripts exist only for the roles writer and reviewer)"},
		"version 2":  {strings.Replace(minimal, "version: 1", "version: 2", 1), "s.yaml:1: version: must be 1"},
		"empty task": {minimal + "task: \"\"\n", "s.yaml:8: task: must not be empty (leave it out for the default task)"},
		"bad approval policy": {minimal + "approve: fs.write,fs.write\n",
			"s.yaml:8: approve: want never, mutating, all, or tool names separated by commas (approval.tools: malformed: names fs.write twice)"},
		"duplicate field": {strings.Replace(minimal, "pattern: review\n", "pattern: review\npattern: relay\n", 1),
			"s.yaml:3: pattern: field given twice"},
		"anchor":        {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: &p scripted\n  - role: reviewer", 1), "s.yaml:5: anchors and aliases are not supported"},
		"merge key":     {minimal + "<<: {name: x}\n", "s.yaml:8: merge keys are not supported"},
		"two documents": {minimal + "---\npattern: relay\n", "s.yaml:8: a spec is one YAML document; found another"},
		"empty":         {"", "s.yaml: empty spec"},
		"comment only":  {"# nothing\n", "s.yaml: empty spec"},
		"not a mapping": {"- a\n", "s.yaml:1: want a mapping of fields, got a list"},
		"syntax":        {"pattern: review\nworkers: [\n", "s.yaml:2: YAML syntax: did not find expected node content"},
		"bad utf8":      {"name: \xff\n", "s.yaml:1:7: not valid UTF-8"},
		"tab indent":    {"pattern: review\nworkers:\n\t- role: x\n", "s.yaml:3: YAML syntax: found character that cannot start any token"},
		"step without text or calls": {worker0("    script:\n      - match: x\n"),
			"s.yaml:7: workers[0].script[0]: a step needs text, calls or both"},
		"empty script": {worker0("    script: []\n"), "s.yaml:6: workers[0].script: a script needs at least one step"},
		"call name": {worker0("    script:\n      - calls:\n          - name: Bad Name\n"),
			"s.yaml:7: workers[0].script[0].calls[0].name: malformed: must start with a lower-case letter"},
		"bad regexp": {worker0("    script:\n      - {match: \"re:(\", text: hi}\n"),
			"s.yaml:7: workers[0].script[0].match: malformed: regular expression does not compile: missing closing )"},
		"arguments list": {worker0("    script:\n      - calls:\n          - {name: fs.read, arguments: [1]}\n"),
			"s.yaml:8: workers[0].script[0].calls[0].arguments: want a mapping of arguments, got a list"},
		"negative usage": {worker0("    script:\n      - {text: hi, usage: {input: -1}}\n"),
			"s.yaml:7: workers[0].script[0].usage.input: must be between 0 and 2147483647"},
		"bad timeout": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: openai\n    model: m\n    openai: {timeout: 10}\n  - role: reviewer", 1),
			"s.yaml:7: workers[0].openai.timeout: want a duration such as \"90s\" or \"2m\", got an integer"},
		"temperature": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: openai\n    model: m\n    openai: {temperature: 2.5}\n  - role: reviewer", 1),
			"s.yaml:7: workers[0].openai.temperature: must be a number between 0 and 2"},
		"base url": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: openai\n    model: m\n    openai: {base_url: \"ftp://x\"}\n  - role: reviewer", 1),
			"s.yaml:7: workers[0].openai.base_url: must be an absolute http or https URL"},
		"base url credentials": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: openai\n    model: m\n    openai: {base_url: \"https://u:sk-secret@x/v1\"}\n  - role: reviewer", 1),
			"s.yaml:7: workers[0].openai.base_url: must not hold credentials (the key comes from OPENAI_API_KEY)"},
		"base url query": {strings.Replace(minimal, "provider: scripted\n  - role: reviewer", "provider: openai\n    model: m\n    openai: {base_url: \"https://x/v1?api-version=1\"}\n  - role: reviewer", 1),
			"s.yaml:7: workers[0].openai.base_url: must not have a query string or a fragment"},
		"handoff bytes": {minimal + "handoff:\n  max_bytes: 300000\n", "s.yaml:9: handoff.max_bytes: must be between 1 and 262144"},
		"over bound":    {minimal + "handoff:\n  over_bound: drop\n", "s.yaml:9: handoff.over_bound: must be one of error, truncate"},
		"heading for an unknown role": {minimal + "handoff:\n  headings:\n    editor: Notes\n",
			`s.yaml:10: handoff.headings: unknown field "editor" (known: writer, reviewer)`},
		"padded marker": {minimal + "handoff:\n  done_marker: \" OK\"\n",
			"s.yaml:9: handoff.done_marker: malformed: must not start or end with white space"},
		"multi-line heading": {minimal + "handoff:\n  task_heading: \"a\\nb\"\n",
			"s.yaml:9: handoff.task_heading: malformed: must be a single line"},
		"relay rounds": {strings.Replace(minimal, "pattern: review", "pattern: relay", 1) + "limits:\n  max_rounds: 2\n",
			"s.yaml:9: limits.max_rounds: a relay has one round; max_rounds applies to pattern review"},
		"rounds": {minimal + "limits:\n  max_rounds: 1001\n", "s.yaml:9: limits.max_rounds: must be between 1 and 1000"},
		"budget": {minimal + "limits:\n  budget:\n    tokens: 0\n", "s.yaml:10: limits.budget.tokens: must be between 1 and 1125899906842624"},
		"wall time": {minimal + "limits:\n  budget: {wall_time: -1s}\n",
			"s.yaml:9: limits.budget.wall_time: must be positive and at most 24h0m0s"},
		"on limit": {minimal + "limits:\n  on_limit: retry\n", "s.yaml:9: limits.on_limit: must be one of stop, final_answer"},
		"reserve without final answer": {minimal + "limits:\n  final_answer_reserve: 0.1\n",
			"s.yaml:9: limits.final_answer_reserve: applies only with on_limit: final_answer"},
		"reserve": {minimal + "limits:\n  on_limit: final_answer\n  final_answer_reserve: 0.9\n",
			"s.yaml:10: limits.final_answer_reserve: must be a number between 0.01 and 0.5"},
		"budget field": {minimal + "limits:\n  budget: {money: 3}\n",
			`s.yaml:9: limits.budget: unknown field "money" (known: tokens, tool_calls, wall_time)`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := spec.Decode("s.yaml", []byte(c.doc))
			requireSpecError(t, err, c.want)
		})
	}
}

func TestDecodeRefusesOversizedInputsBeforeParsing(t *testing.T) {
	big := minimal + "# " + strings.Repeat("x", spec.MaxBytes) + "\n"
	_, err := spec.Decode("big.yaml", []byte(big))
	requireSpecError(t, err, "big.yaml: spec: too large ("+itoa(len(big))+" > limit "+itoa(spec.MaxBytes)+")")
	require.ErrorIs(t, err, bound.ErrExceeded)
}

func TestDecodeFileErrors(t *testing.T) {
	_, err := spec.DecodeFile("testdata/does-not-exist.yaml")
	require.Error(t, err)
	_, err = spec.DecodeFile("testdata/bad.yaml")
	requireSpecError(t, err, "testdata/bad.yaml:7: workers[0].max_turns: want an integer, got a string")
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestR1_SpecNamesTheApprovalPolicy(t *testing.T) {
	for _, v := range []string{"never", "mutating", "all", "fs.write", "fs.write, text.stats"} {
		s, err := spec.Decode("s.yaml", []byte(minimal+"approve: "+v+"\n"))
		require.NoError(t, err, v)
		require.Equal(t, v, s.Approve)
	}
	s, err := spec.Decode("s.yaml", []byte(minimal))
	require.NoError(t, err)
	require.Empty(t, s.Approve, "no field: never")
}

func TestO5_OnLimitFinalAnswerDecodes(t *testing.T) {
	s, err := spec.Decode("s.yaml", []byte(minimal+"limits:\n  on_limit: final_answer\n  final_answer_reserve: 0.2\n"))
	require.NoError(t, err)
	require.True(t, s.Limits.FinalAnswer)
	require.Equal(t, 0.2, s.Limits.FinalAnswerReserve)
	s, err = spec.Decode("s.yaml", []byte(minimal+"limits:\n  on_limit: stop\n"))
	require.NoError(t, err)
	require.False(t, s.Limits.FinalAnswer)
}

// A control character, a NUL or a byte that is not UTF-8 is named with its
// line and column, in a value or anywhere else, and never echoed.
func TestDecodeNamesTheLineOfAControlCharacterOrBadByte(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"control in a quoted value": {minimal + "name: \"a\x01b\"\n",
			`s.yaml:8:9: control character U+0001 (only tab, newline and carriage return are allowed)`},
		"NUL in a plain value": {minimal + "name: a\x00b\n",
			`s.yaml:8:8: control character U+0000 (only tab, newline and carriage return are allowed)`},
		"escape in a comment": {"# \x1b[2J\n" + minimal,
			`s.yaml:1:3: control character U+001B (only tab, newline and carriage return are allowed)`},
		"DEL": {minimal + "name: a\x7f\n",
			`s.yaml:8:8: control character U+007F (only tab, newline and carriage return are allowed)`},
		"C1 control": {minimal + "name: a\u0085\n",
			`s.yaml:8:8: control character U+0085 (only tab, newline and carriage return are allowed)`},
		"not UTF-8": {minimal + "name: \"é\xff\"\n",
			`s.yaml:8:9: not valid UTF-8`},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := spec.Decode("s.yaml", []byte(c.doc))
			requireSpecError(t, err, c.want)
		})
	}
}
