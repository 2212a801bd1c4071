package render_test

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// hostile clears the screen, sets the window title, writes the clipboard
// (OSC 52), rewrites the line, reverses the text, and sends a lone C1 CSI
// byte and a C1 control.
const hostile = "\x1b[2J\x1b]0;owned\x07\x1b]52;c;aGk=\x07\roverwritten\u202eesrever\xff\x9b\u009b31m\x7f"

// requireInert fails if out holds anything a terminal would obey: a
// control character other than newline, DEL, a C1 control, a bidi mark,
// or bytes that are not UTF-8.
func requireInert(t *testing.T, out string) {
	t.Helper()
	require.True(t, utf8.ValidString(out), "output is UTF-8")
	for i, r := range out {
		bad := r < 0x20 && r != '\n' || r == 0x7f || r >= 0x80 && r < 0xa0 ||
			r == 0x200e || r == 0x200f || r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069
		require.False(t, bad, "control character %U at byte %d of %q", r, i, out)
	}
}

func TestS2_TextAndFieldShowControlCharactersVisibly(t *testing.T) {
	require.Equal(t, `\x1b[2J\x1b]0;owned\x07\x1b]52;c;aGk=\x07\roverwritten\u202eesrever\xff\x9b\x9b31m\x7f`, render.Field(hostile))
	require.Equal(t, "a\nb\tc\\x1b", render.Text("a\nb\tc\x1b"), "Text keeps lines and tabs")
	require.Equal(t, `a\nb\tc`, render.Field("a\nb\tc"), "Field keeps one line")
	plain := "pair-1 héllo → 世界 \\x1b"
	require.Equal(t, plain, render.Field(plain), "printable text, backslashes included, is unchanged")
	require.Equal(t, render.Field(hostile), render.Field(render.Field(hostile)), "escaping twice changes nothing")
}

// Every text a timeline carries reaches the terminal inert, with and
// without colors: names, IDs, model text, tool
// results and progress, problems, reasons.
func TestS2_RenderShowsHostileTextVisiblyInEveryField(t *testing.T) {
	// Timeline text is UTF-8 (the kernel refuses anything else), so the
	// lone bytes are left out here.
	h := strings.ToValidUTF8(hostile, "")
	w, rv := "writer"+h, "reviewer"+h
	ls := lines(t,
		orchestrator.Started{PairID: "pair-1" + h, PlanID: "plan" + h, Pattern: "review_loop" + h, First: w, Second: rv},
		relay(w, 1, event.RunStarted{RunID: "pair-1/writer/run-1", PlanID: "plan-1", PlanFingerprint: "ab", Definition: "writer", Model: "m-1"}),
		relay(w, 2, event.TurnStarted{RunID: "pair-1/writer/run-1", TurnID: "t1", Index: 1}),
		relay(w, 3, event.ToolStarted{TurnID: "t1", OperationID: "op-2", CallID: "c1", Name: "fs.write", Effect: "mutating"}),
		relay(w, 4, event.ToolProgress{OperationID: "op-2", CallID: "c1", Message: "half" + h}),
		relay(w, 5, event.ToolCompleted{OperationID: "op-2", CallID: "c1", Name: "fs.write", Content: "content" + h}),
		relay(w, 6, event.ToolCompleted{OperationID: "op-3", CallID: "c2", Name: "fs.read",
			Problem: problem.Must("not_found", "message"+h)}),
		relay(w, 7, event.ModelTextDelta{OperationID: "op-4", Text: "line one" + h + "\nline two" + h}),
		relay(w, 8, event.ModelFailed{OperationID: "op-4", Problem: problem.Must("provider_error", "server said"+h)}),
		relay(w, 9, event.ToolFailed{OperationID: "op-9", CallID: "c9", Name: "fs.write", Outcome: "uncertain",
			Problem: problem.Must("write_uncertain", "may have"+h)}),
		relay(w, 10, event.RunFailed{RunID: "pair-1/writer/run-1", Problem: problem.Must("boom", "it broke"+h)}),
		orchestrator.HandedOff{Round: 1, From: w, To: rv, FromRunID: "pair-1/writer/run-1", Bytes: 4},
		orchestrator.Ended{PairID: "pair-1", Reason: orchestrator.ReasonWorkerFailed, Worker: w, RunID: "pair-1/writer/run-1",
			Problem: problem.Must("boom", "it broke"+h)},
	)
	for _, color := range []bool{false, true} {
		var out bytes.Buffer
		rd := render.New(&out, render.Options{Color: color})
		for _, l := range ls {
			require.NoError(t, rd.Line(l))
		}
		s := out.String()
		if color {
			// The renderer's own colors are the only escapes it writes.
			for _, c := range []string{"1", "2", "31", "32", "33", "34", "35", "36", "0"} {
				s = strings.ReplaceAll(s, "\x1b["+c+"m", "")
			}
		}
		requireInert(t, s)
		require.Contains(t, s, `\x1b]52;c;aGk=\x07`, "shown, not obeyed")
		require.Contains(t, s, `[writer\x1b[2J`)
		for _, text := range []string{"half", "content", "message", "line one", "line two", "server said", "may have", "it broke"} {
			require.Contains(t, s, text+`\x1b[2J`, text)
		}
	}
}

// Every bidirectional control and every invisible formatting character
// (zero-width spaces and joiners, word joiner, byte order mark, soft
// hyphen, tag characters) is shown as its escape, each on its own, in
// Text and in Field; the printable neighbours of each stay as they are.
func TestS2_EveryBidiAndZeroWidthCharacterIsEscaped(t *testing.T) {
	for _, c := range []struct {
		r    rune
		want string
	}{
		{0x061c, `\u061c`},   // arabic letter mark
		{0x200e, `\u200e`},   // left-to-right mark
		{0x200f, `\u200f`},   // right-to-left mark
		{0x202a, `\u202a`},   // left-to-right embedding
		{0x202b, `\u202b`},   // right-to-left embedding
		{0x202c, `\u202c`},   // pop directional formatting
		{0x202d, `\u202d`},   // left-to-right override
		{0x202e, `\u202e`},   // right-to-left override
		{0x2066, `\u2066`},   // left-to-right isolate
		{0x2067, `\u2067`},   // right-to-left isolate
		{0x2068, `\u2068`},   // first strong isolate
		{0x2069, `\u2069`},   // pop directional isolate
		{0x200b, `\u200b`},   // zero width space
		{0x200c, `\u200c`},   // zero width non-joiner
		{0x200d, `\u200d`},   // zero width joiner
		{0x2060, `\u2060`},   // word joiner
		{0x2061, `\u2061`},   // function application
		{0xfeff, `\ufeff`},   // zero width no-break space (byte order mark)
		{0x180e, `\u180e`},   // mongolian vowel separator
		{0x00ad, `\xad`},     // soft hyphen
		{0xe0041, `\ue0041`}, // tag latin capital letter a
	} {
		s := "a" + string(c.r) + "b"
		require.Equal(t, "a"+c.want+"b", render.Text(s), "%U in Text", c.r)
		require.Equal(t, "a"+c.want+"b", render.Field(s), "%U in Field", c.r)
	}
	for _, r := range []rune{0x061b, 0x2010, 0x2070, 0x00ae, 0xfefe} {
		s := "a" + string(r) + "b"
		require.Equal(t, s, render.Text(s), "%U is printable", r)
	}
}
