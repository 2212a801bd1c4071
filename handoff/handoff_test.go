package handoff_test

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func answer(t testing.TB, text string) engine.Result {
	t.Helper()
	m, err := message.Assistant(text)
	require.NoError(t, err)
	return engine.Result{Status: engine.Completed, Final: m, Turns: 2, LastSeq: 12}
}

func policy(t testing.TB, cfg handoff.Config) handoff.Policy {
	t.Helper()
	p, err := handoff.NewPolicy(cfg)
	require.NoError(t, err)
	return p
}

func input(t testing.TB, text string) handoff.Input {
	return handoff.Input{Task: "Write a line.", From: "writer", To: "reviewer", RunID: "run-1", Result: answer(t, text)}
}

func TestO3_BuildIsOneUserMessageFramedByThePolicy(t *testing.T) {
	p := policy(t, handoff.Config{Headings: map[string]string{"reviewer": "Reviewer feedback"}})
	h, err := p.Build(input(t, "The sea is wide."))
	require.NoError(t, err)
	m := h.Message()
	require.Equal(t, message.RoleUser, m.Role())
	require.Equal(t, 1, m.Len())
	require.Equal(t, "Task:\nWrite a line.\n\nAnswer from writer:\nThe sea is wide.", m.Text())

	in := input(t, "Shorter.")
	in.From, in.To = "reviewer", "writer"
	h, err = p.Build(in)
	require.NoError(t, err)
	require.Equal(t, "Task:\nWrite a line.\n\nReviewer feedback:\nShorter.", h.Message().Text())

	in.Task = ""
	h, err = p.Build(in)
	require.NoError(t, err)
	require.Equal(t, "Reviewer feedback:\nShorter.", h.Message().Text())
}

func TestO3_BuildCopiesOnlyTheFinalAnswerText(t *testing.T) {
	// A final answer never holds calls (the engine ends a run on a message
	// without them), but Build reads only its text whatever it holds.
	call, err := tool.NewCall("call-1", "echo", []byte(`{"secret":1}`))
	require.NoError(t, err)
	m, err := message.Assistant("Answer.", call)
	require.NoError(t, err)
	in := input(t, "x")
	in.Result.Final = m
	h, err := policy(t, handoff.Config{}).Build(in)
	require.NoError(t, err)
	require.Zero(t, h.Message().NumCalls())
	require.NotContains(t, h.Message().Text(), "secret")
	require.True(t, strings.HasSuffix(h.Message().Text(), "\nAnswer."))
}

func TestO3_ProvenanceIsRecordedBesideTheMessage(t *testing.T) {
	h, err := policy(t, handoff.Config{}).Build(input(t, "The sea is wide."))
	require.NoError(t, err)
	text := h.Message().Text()
	require.Equal(t, handoff.Provenance{
		From: "writer", To: "reviewer", RunID: "run-1", LastSeq: 12,
		SHA256: sha256.Sum256([]byte(text)), Bytes: len(text), AnswerBytes: len("The sea is wide."),
	}, h.Provenance())
	require.Len(t, h.Provenance().Digest(), 64)
	require.NotContains(t, text, h.Provenance().Digest(), "provenance never enters the message")
	require.NotContains(t, text, "run-1")
}

func TestO3_BuildIsPure(t *testing.T) {
	p := policy(t, handoff.Config{})
	a, err := p.Build(input(t, "Same."))
	require.NoError(t, err)
	b, err := p.Build(input(t, "Same."))
	require.NoError(t, err)
	require.Equal(t, a.Message().Text(), b.Message().Text())
	require.Equal(t, a.Provenance(), b.Provenance())
}

func TestO3_OverTheBoundRejects(t *testing.T) {
	p := policy(t, handoff.Config{MaxBytes: 50})
	_, err := p.Build(input(t, strings.Repeat("x", 40)))
	require.ErrorIs(t, err, bound.ErrExceeded)
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, "handoff.content", be.Field)
	require.Equal(t, 50, be.Limit)
	require.NotContains(t, err.Error(), "xxxx", "errors never quote the content")
}

func TestO3_OverTheBoundCutsWithAVisibleMarker(t *testing.T) {
	p := policy(t, handoff.Config{MaxBytes: 120, Over: handoff.Cut})
	long := strings.Repeat("é", 100) // two bytes a rune: a cut can fall inside one
	for extra := range 3 {
		h, err := p.Build(input(t, strings.Repeat("a", extra)+long))
		require.NoError(t, err)
		text := h.Message().Text()
		require.LessOrEqual(t, len(text), 120)
		require.True(t, utf8.ValidString(text))
		require.True(t, strings.HasSuffix(text, handoff.CutMarker))
		require.True(t, h.Provenance().Cut)
		require.Equal(t, len(text), h.Provenance().Bytes)
	}
	// Content within the bound is never cut.
	h, err := p.Build(input(t, "short"))
	require.NoError(t, err)
	require.False(t, h.Provenance().Cut)
	require.NotContains(t, h.Message().Text(), handoff.CutMarker)

	// A task that alone does not fit cannot be cut.
	in := input(t, "x")
	in.Task = strings.Repeat("t", 200)
	_, err = p.Build(in)
	require.ErrorIs(t, err, bound.ErrExceeded)
}

func TestO5_DoneMarkerIsALineOfItsOwn(t *testing.T) {
	p := policy(t, handoff.Config{})
	for text, want := range map[string]bool{
		"APPROVED":                  true,
		"Looks good.\nAPPROVED":     true,
		"Looks good.\n  APPROVED  ": true,
		"APPROVED\nno notes":        true,
		"NOT APPROVED":              false,
		"approved":                  false,
		"Not yet. APPROVED later?":  false,
	} {
		m, err := message.Assistant(text)
		require.NoError(t, err)
		require.Equal(t, want, p.Done(m), text)
	}
	custom := policy(t, handoff.Config{DoneMarker: "LGTM"})
	m, _ := message.Assistant("ok\nLGTM")
	require.True(t, custom.Done(m))
	require.False(t, p.Done(m))
	require.False(t, handoff.Policy{}.Done(m))
}

func TestPolicyValidation(t *testing.T) {
	for name, cfg := range map[string]handoff.Config{
		"negative bound":  {MaxBytes: -1},
		"bound too large": {MaxBytes: bound.MaxMessageBytes + 1},
		"unknown over":    {Over: 9},
		"multi-line head": {TaskHeading: "Task\nnow"},
		"long heading":    {TaskHeading: strings.Repeat("h", handoff.MaxHeadingBytes+1)},
		"bad role":        {Headings: map[string]string{"Reviewer": "x"}},
		"empty heading":   {Headings: map[string]string{"reviewer": ""}},
		"padded marker":   {DoneMarker: " OK"},
		"multi-line done": {DoneMarker: "OK\nGO"},
		"invalid utf8":    {TaskHeading: "\xff"},
	} {
		_, err := handoff.NewPolicy(cfg)
		require.ErrorIs(t, err, bound.ErrInvalid, name)
	}
	p := policy(t, handoff.Config{})
	require.Equal(t, handoff.DefaultMaxBytes, p.MaxBytes())
	require.Equal(t, handoff.Reject, p.Over())
	require.Equal(t, "Task", p.TaskHeading())
	require.Equal(t, "APPROVED", p.DoneMarker())
	require.Equal(t, "Answer from writer", p.Heading("writer"))
}

func TestPolicyCopiesItsHeadings(t *testing.T) {
	headings := map[string]string{"reviewer": "Feedback"}
	p := policy(t, handoff.Config{Headings: headings})
	headings["reviewer"] = "Changed"
	require.Equal(t, "Feedback", p.Heading("reviewer"))
}

func TestBuildValidatesItsInput(t *testing.T) {
	p := policy(t, handoff.Config{})
	good := input(t, "x")
	for name, mutate := range map[string]func(*handoff.Input){
		"no from":   func(in *handoff.Input) { in.From = "" },
		"bad to":    func(in *handoff.Input) { in.To = "Reviewer" },
		"bad run":   func(in *handoff.Input) { in.RunID = id.Run("run 1") },
		"not done":  func(in *handoff.Input) { in.Result.Status = engine.Failed },
		"no answer": func(in *handoff.Input) { in.Result.Final = message.Message{} },
		"bad task":  func(in *handoff.Input) { in.Task = "\xff" },
	} {
		in := good
		mutate(&in)
		_, err := p.Build(in)
		require.ErrorIs(t, err, bound.ErrInvalid, name)
	}
	_, err := handoff.Policy{}.Build(good)
	require.ErrorIs(t, err, bound.ErrInvalid)
	require.True(t, errors.Is(err, bound.ErrInvalid))
}

// FuzzBuild holds Build to its bound on any answer text: the message fits,
// is valid UTF-8, and is cut only when the answer did not fit.
func FuzzBuild(f *testing.F) {
	f.Add("The sea is wide.", 120, true)
	f.Add(strings.Repeat("é", 80), 64, true)
	f.Add("\xff\xfe", 100, false)
	f.Fuzz(func(t *testing.T, text string, maxBytes int, cut bool) {
		if len(text) > 4<<10 || maxBytes < 1 || maxBytes > 8<<10 {
			return
		}
		over := handoff.Reject
		if cut {
			over = handoff.Cut
		}
		p, err := handoff.NewPolicy(handoff.Config{MaxBytes: maxBytes, Over: over})
		require.NoError(t, err)
		m, err := message.Assistant(text)
		if err != nil {
			return // not a valid answer: the engine never produces one
		}
		h, err := p.Build(handoff.Input{Task: "t", From: "a", To: "b", RunID: "run-1",
			Result: engine.Result{Status: engine.Completed, Final: m}})
		if err != nil {
			require.ErrorIs(t, err, bound.ErrInvalid)
			return
		}
		got := h.Message().Text()
		require.LessOrEqual(t, len(got), maxBytes)
		require.True(t, utf8.ValidString(got))
		require.Equal(t, sha256.Sum256([]byte(got)), h.Provenance().SHA256)
		if h.Provenance().Cut {
			require.True(t, cut, "Reject never cuts")
			require.True(t, strings.HasSuffix(got, handoff.CutMarker))
			require.Less(t, len(got)-len(handoff.CutMarker), len("Task:\nt\n\nAnswer from a:\n")+len(text))
		} else {
			require.True(t, strings.HasSuffix(got, ":\n"+text), "uncut content keeps the whole answer")
		}
	})
}
