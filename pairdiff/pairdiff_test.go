package pairdiff_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/pairdiff"
)

// timeline is a small pair timeline in canonical JSON lines; result is
// the content of its one tool result, times and run IDs vary with stamp.
func timeline(result, stamp string) string {
	lines := []string{
		`{"seq":1,"kind":"pair.started","time":"2026-12-03T12:00:0` + stamp + `Z","payload":{"pair_id":"pair-` + stamp + `","pattern":"relay"}}`,
		`{"seq":2,"kind":"run.started","time":"2026-12-03T12:00:0` + stamp + `Z","payload":{"worker":"writer","run_id":"run-` + stamp + `","run_seq":1,"payload":{"run_id":"run-` + stamp + `"}}}`,
		`{"seq":3,"kind":"tool.started","time":"2026-12-03T12:00:0` + stamp + `Z","payload":{"worker":"writer","run_id":"run-` + stamp + `","run_seq":2,"payload":{"call_id":"c-` + stamp + `","name":"text.stats"}}}`,
		`{"seq":4,"kind":"tool.completed","time":"2026-12-03T12:00:0` + stamp + `Z","payload":{"worker":"writer","run_id":"run-` + stamp + `","run_seq":3,"payload":{"call_id":"c-` + stamp + `","outcome":{"content":"` + result + `"}}}}`,
		`{"seq":5,"kind":"run.completed","time":"2026-12-03T12:00:0` + stamp + `Z","payload":{"worker":"writer","run_id":"run-` + stamp + `","run_seq":4,"payload":{"final_text":"done"}}}`,
		`{"seq":6,"kind":"pair.completed","time":"2026-12-03T12:00:0` + stamp + `Z","payload":{"pair_id":"pair-` + stamp + `","reason":"completed"}}`,
	}
	return strings.Join(lines, "\n") + "\n"
}

func parse(t *testing.T, name, s string) pairdiff.Timeline {
	t.Helper()
	tl, err := pairdiff.Parse(name, strings.NewReader(s))
	require.NoError(t, err)
	return tl
}

func TestO7_IdenticalTimelinesMatch(t *testing.T) {
	a := timeline("12 words", "1")
	require.Nil(t, pairdiff.Compare(parse(t, "A", a), parse(t, "B", a), pairdiff.Options{Exact: true}))
}

func TestO7_TimesAndIDsAreIgnoredUnlessExact(t *testing.T) {
	a, b := parse(t, "A", timeline("12 words", "1")), parse(t, "B", timeline("12 words", "2"))
	require.Nil(t, pairdiff.Compare(a, b, pairdiff.Options{}))
	d := pairdiff.Compare(a, b, pairdiff.Options{Exact: true})
	require.NotNil(t, d)
	require.Equal(t, 0, d.Index)
	require.Equal(t, []pairdiff.FieldDiff{
		{Path: "time", A: `"2026-12-03T12:00:01Z"`, B: `"2026-12-03T12:00:02Z"`},
		{Path: "pair_id", A: `"pair-1"`, B: `"pair-2"`},
	}, d.Fields)
}

func TestO7_FirstDivergenceIsTheDifferingToolResult(t *testing.T) {
	a, b := parse(t, "A", timeline("12 words", "1")), parse(t, "B", timeline("13 words", "2"))
	d := pairdiff.Compare(a, b, pairdiff.Options{Context: 2})
	require.NotNil(t, d)
	require.Equal(t, 3, d.Index)
	require.Equal(t, "tool.completed", d.A.Kind)
	require.Equal(t, "writer", d.B.Worker)
	require.Equal(t, []pairdiff.FieldDiff{{Path: "payload.outcome.content", A: `"12 words"`, B: `"13 words"`}}, d.Fields)
	require.Equal(t, `first divergence at event 4 (A has 6 events, B has 6)
      2  run.started        writer
      3  tool.started       writer   text.stats
A     4  tool.completed     writer
B     4  tool.completed     writer
      payload.outcome.content: A "12 words", B "13 words"
A     5  run.completed      writer
A     6  pair.completed
B     5  run.completed      writer
B     6  pair.completed
`, d.String())
}

func TestO7_AShorterTimelineDivergesWhereItEnds(t *testing.T) {
	full := timeline("x", "1")
	short := strings.Join(strings.SplitAfter(full, "\n")[:4], "")
	d := pairdiff.Compare(parse(t, "A", short), parse(t, "B", full), pairdiff.Options{})
	require.NotNil(t, d)
	require.Equal(t, 4, d.Index)
	require.Nil(t, d.A)
	require.Equal(t, "run.completed", d.B.Kind)
	require.Contains(t, d.String(), "A   (ended after 4 events)\nB     5  run.completed      writer\n")
}

func TestO7_KindsAndWorkersDiffer(t *testing.T) {
	a := parse(t, "A", timeline("x", "1"))
	b := parse(t, "B", strings.Replace(strings.Replace(timeline("x", "1"), `"kind":"tool.started"`, `"kind":"model.started"`, 1), `"worker":"writer","run_id":"run-1","run_seq":2`, `"worker":"reviewer","run_id":"run-1","run_seq":2`, 1))
	d := pairdiff.Compare(a, b, pairdiff.Options{})
	require.Equal(t, []pairdiff.FieldDiff{
		{Path: "kind", A: `"tool.started"`, B: `"model.started"`},
		{Path: "worker", A: `"writer"`, B: `"reviewer"`},
	}, d.Fields)
}

func TestO7_MalformedInputIsATypedErrorWithoutTheLine(t *testing.T) {
	for name, in := range map[string]string{
		"not json":      "{\"seq\":1,\"kind\":\"a\"}\nsk-secret-value\n",
		"no kind":       `{"seq":1,"payload":{}}`,
		"two values":    `{"kind":"a"} {"kind":"b"}`,
		"bad seq":       `{"seq":-1,"kind":"a"}`,
		"array":         `[1,2]`,
		"too long line": `{"kind":"` + strings.Repeat("x", pairdiff.MaxLineBytes) + `"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := pairdiff.Parse("A", strings.NewReader(in))
			require.ErrorIs(t, err, pairdiff.ErrMalformed)
			var ie *pairdiff.InputError
			require.True(t, errors.As(err, &ie))
			require.NotContains(t, err.Error(), "secret")
		})
	}
}

func TestO7_ReportQuotesNamesThatCouldDriveATerminal(t *testing.T) {
	a := parse(t, "A", `{"seq":1,"kind":"x\u001b[2J","payload":{"worker":"w\u202e"}}`)
	b := parse(t, "B", `{"seq":1,"kind":"y","payload":{}}`)
	s := pairdiff.Compare(a, b, pairdiff.Options{}).String()
	require.NotContains(t, s, "\x1b")
	require.NotContains(t, s, "\u202e")
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(timeline("a", "1")))
	f.Add([]byte(`{"kind":"a","payload":{"worker":1}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tl, err := pairdiff.Parse("A", strings.NewReader(string(b)))
		if err != nil {
			require.ErrorIs(t, err, pairdiff.ErrMalformed)
			return
		}
		require.Nil(t, pairdiff.Compare(tl, tl, pairdiff.Options{Exact: true}))
		_ = pairdiff.Compare(tl, nil, pairdiff.Options{}).String()
	})
}
