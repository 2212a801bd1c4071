package message_test

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func call(t testing.TB, callID, args string) tool.Call {
	t.Helper()
	c, err := tool.NewCall(id.Call(callID), "read_file", []byte(args))
	require.NoError(t, err)
	return c
}

func result(t testing.TB, callID, content string) tool.Result {
	t.Helper()
	r, err := tool.NewResult(id.Call(callID), content)
	require.NoError(t, err)
	return r
}

func text(t testing.TB, s string) message.Part {
	t.Helper()
	p, err := message.TextPart(s)
	require.NoError(t, err)
	return p
}

func requireBoundError(t *testing.T, err error, field string, rule bound.Rule) *bound.Error {
	t.Helper()
	var be *bound.Error
	require.ErrorAs(t, err, &be)
	require.Equal(t, field, be.Field)
	require.Equal(t, rule, be.Rule)
	require.ErrorIs(t, err, bound.ErrInvalid)
	if rule == bound.TooLarge || rule == bound.TooMany {
		require.ErrorIs(t, err, bound.ErrExceeded)
	}
	return be
}

func TestK1_MessageCopiesItsParts(t *testing.T) {
	parts := []message.Part{text(t, "hello "), text(t, "world")}
	m, err := message.New(message.RoleUser, parts...)
	require.NoError(t, err)

	parts[0] = text(t, "changed ")
	parts[1] = message.Part{}
	require.Equal(t, "hello world", m.Text())
	require.Equal(t, 2, m.Len())
	require.Equal(t, "world", m.Part(1).Text())
}

func TestK1_PartsHoldImmutableCallsAndResults(t *testing.T) {
	args := []byte(`{"path":"a.txt"}`)
	c, err := tool.NewCall("call-1", "read_file", args)
	require.NoError(t, err)
	p := message.CallPart(c)
	args[2] = 'X' // the caller's bytes
	got, ok := p.Call()
	require.True(t, ok)
	out := got.Arguments()
	out[2] = 'Y' // the returned copy
	again, _ := p.Call()
	require.JSONEq(t, `{"path":"a.txt"}`, string(again.Arguments()))

	m, err := message.Assistant("", c)
	require.NoError(t, err)
	for c := range m.Calls() {
		a := c.Arguments()
		a[0] = '['
	}
	require.Equal(t, `{"path":"a.txt"}`, firstArgs(m))
}

func firstArgs(m message.Message) string {
	for c := range m.Calls() {
		return c.ArgumentsString()
	}
	return ""
}

// Every field of the value types is unexported, so only constructors can
// make them and nothing outside the package can write them.
func TestK1_ValueTypesHaveNoExportedFields(t *testing.T) {
	for _, v := range []any{message.Part{}, message.Message{}} {
		typ := reflect.TypeOf(v)
		for i := range typ.NumField() {
			require.False(t, typ.Field(i).IsExported(), "%s.%s", typ.Name(), typ.Field(i).Name)
		}
	}
}

func TestK2_PartsPerMessage(t *testing.T) {
	parts := make([]message.Part, bound.MaxPartsPerMessage+1)
	for i := range parts {
		parts[i] = text(t, "x")
	}
	m, err := message.New(message.RoleUser, parts[:bound.MaxPartsPerMessage]...)
	require.NoError(t, err)
	require.Equal(t, bound.MaxPartsPerMessage, m.Len())

	_, err = message.New(message.RoleUser, parts...)
	be := requireBoundError(t, err, "message.parts", bound.TooMany)
	require.Equal(t, bound.MaxPartsPerMessage, be.Limit)
	require.Equal(t, bound.MaxPartsPerMessage+1, be.Got)
}

func TestK2_MessageBytes(t *testing.T) {
	atLimit := strings.Repeat("a", bound.MaxMessageBytes)
	m, err := message.User(atLimit)
	require.NoError(t, err)
	require.Len(t, m.Text(), bound.MaxMessageBytes, "never truncated")

	_, err = message.User(atLimit + "a")
	requireBoundError(t, err, "message.parts[0].text", bound.TooLarge)
	_, err = message.TextPart(atLimit + "a")
	requireBoundError(t, err, "part.text", bound.TooLarge)

	// The bound is on the whole message: text, call arguments and result
	// content together.
	half := bound.MaxMessageBytes / 2
	_, err = message.New(message.RoleUser, text(t, strings.Repeat("a", half)), text(t, strings.Repeat("b", half)))
	require.NoError(t, err)
	_, err = message.New(message.RoleUser, text(t, strings.Repeat("a", half)), text(t, strings.Repeat("b", half+1)))
	be := requireBoundError(t, err, "message", bound.TooLarge)
	require.Equal(t, bound.MaxMessageBytes+1, be.Got)

	args := `{"k":"` + strings.Repeat("v", bound.MaxToolArgumentsBytes-8) + `"}`
	c := call(t, "c1", args)
	_, err = message.Assistant(strings.Repeat("a", bound.MaxMessageBytes-len(args)), c)
	require.NoError(t, err)
	_, err = message.Assistant(strings.Repeat("a", bound.MaxMessageBytes-len(args)+1), c)
	requireBoundError(t, err, "message", bound.TooLarge)

	content := strings.Repeat("r", bound.MaxToolResultBytes)
	rs := []tool.Result{result(t, "c1", content), result(t, "c2", content)}
	_, err = message.Results(rs...)
	require.NoError(t, err)
	_, err = message.Results(append(rs, result(t, "c3", "x"))...)
	requireBoundError(t, err, "message", bound.TooLarge)
}

func TestNew_RoleDecidesWhichPartsAreAllowed(t *testing.T) {
	tp := text(t, "hi")
	cp := message.CallPart(call(t, "c1", ""))
	rp := message.ResultPart(result(t, "c1", "ok"))
	for _, tc := range []struct {
		role  message.Role
		parts []message.Part
		field string // "" means valid
	}{
		{message.RoleUser, []message.Part{tp}, ""},
		{message.RoleUser, []message.Part{tp, cp}, "message.parts[1]"},
		{message.RoleUser, []message.Part{rp}, "message.parts[0]"},
		{message.RoleAssistant, []message.Part{tp, cp}, ""},
		{message.RoleAssistant, []message.Part{cp}, ""},
		{message.RoleAssistant, []message.Part{tp, rp}, "message.parts[1]"},
		{message.RoleTool, []message.Part{rp}, ""},
		{message.RoleTool, []message.Part{rp, tp}, "message.parts[1]"},
		{message.RoleTool, []message.Part{cp}, "message.parts[0]"},
	} {
		m, err := message.New(tc.role, tc.parts...)
		if tc.field == "" {
			require.NoError(t, err, "%s %d parts", tc.role, len(tc.parts))
			require.Equal(t, tc.role, m.Role())
			continue
		}
		requireBoundError(t, err, tc.field, bound.Conflict)
	}
}

func TestNew_RejectsZeroAndEmpty(t *testing.T) {
	_, err := message.New(message.RoleUser)
	requireBoundError(t, err, "message.parts", bound.Required)
	_, err = message.New(0, text(t, "x"))
	requireBoundError(t, err, "message.role", bound.Required)
	_, err = message.New(message.Role(9), text(t, "x"))
	requireBoundError(t, err, "message.role", bound.Malformed)
	_, err = message.New(message.RoleUser, text(t, "x"), message.Part{})
	requireBoundError(t, err, "message.parts[1]", bound.Required)
	_, err = message.New(message.RoleAssistant, message.CallPart(tool.Call{}))
	requireBoundError(t, err, "message.parts[0].tool_call", bound.Required)
	_, err = message.New(message.RoleTool, message.ResultPart(tool.Result{}))
	requireBoundError(t, err, "message.parts[0].tool_result", bound.Required)
	_, err = message.TextPart("")
	requireBoundError(t, err, "part.text", bound.Required)
	_, err = message.TextPart("\xff")
	requireBoundError(t, err, "part.text", bound.Malformed)
	_, err = message.User("")
	requireBoundError(t, err, "message.parts[0].text", bound.Required)
	_, err = message.Assistant("")
	requireBoundError(t, err, "message.parts", bound.Required)
	_, err = message.Results()
	requireBoundError(t, err, "message.parts", bound.Required)
	require.True(t, message.Message{}.IsZero())
	require.True(t, message.Part{}.IsZero())
}

func TestNew_RejectsDuplicateCallIDs(t *testing.T) {
	_, err := message.Assistant("x", call(t, "c1", ""), call(t, "c2", ""), call(t, "c1", `{"a":1}`))
	requireBoundError(t, err, "message.parts[3].tool_call.id", bound.Malformed)
	_, err = message.Results(result(t, "c1", "a"), result(t, "c1", "b"))
	requireBoundError(t, err, "message.parts[1].tool_result.call_id", bound.Malformed)
}

func TestMessage_Accessors(t *testing.T) {
	c1, c2 := call(t, "c1", `{"a":1}`), call(t, "c2", "")
	m, err := message.New(message.RoleAssistant, text(t, "one "), message.CallPart(c1), text(t, "two"), message.CallPart(c2))
	require.NoError(t, err)
	require.Equal(t, "one two", m.Text())
	require.Equal(t, 2, m.NumCalls())
	require.Equal(t, []tool.Call{c1, c2}, slices.Collect(m.Calls()))
	require.Empty(t, slices.Collect(m.Results()))
	require.Equal(t, message.KindToolCall, m.Part(1).Kind())
	got, ok := m.Part(1).Call()
	require.True(t, ok)
	require.Equal(t, c1, got)
	_, ok = m.Part(0).Call()
	require.False(t, ok)
	_, ok = m.Part(0).Result()
	require.False(t, ok)

	// Iterators stop when asked.
	n := 0
	for range m.Parts() {
		n++
		break
	}
	require.Equal(t, 1, n)
	for range m.Calls() {
		n++
		break
	}
	require.Equal(t, 2, n)

	p := problem.Must("not_found", "no such file")
	r, err := tool.NewProblemResult("c1", p, "")
	require.NoError(t, err)
	tm, err := message.Results(r, result(t, "c2", "ok"))
	require.NoError(t, err)
	require.Equal(t, message.RoleTool, tm.Role())
	require.Equal(t, "", tm.Text())
	require.Equal(t, 0, tm.NumCalls())
	rs := slices.Collect(tm.Results())
	require.Len(t, rs, 2)
	gp, ok := rs[0].Problem()
	require.True(t, ok)
	require.Equal(t, p, gp)
	for range tm.Results() {
		break
	}
	um, err := message.User("hi")
	require.NoError(t, err)
	require.Equal(t, "hi", um.Text())
	require.Equal(t, message.KindText, um.Part(0).Kind())
}

func TestRole_StringAndParse(t *testing.T) {
	for _, r := range []message.Role{message.RoleUser, message.RoleAssistant, message.RoleTool} {
		got, err := message.ParseRole(r.String())
		require.NoError(t, err)
		require.Equal(t, r, got)
	}
	_, err := message.ParseRole("")
	requireBoundError(t, err, "message.role", bound.Required)
	_, err = message.ParseRole("system")
	requireBoundError(t, err, "message.role", bound.Malformed)
	require.Equal(t, "role(9)", message.Role(9).String())
	require.Equal(t, "kind(9)", message.Kind(9).String())
	require.Equal(t, "tool_result", message.KindToolResult.String())
}

func TestK2_ErrorsNameTheFieldNotTheValue(t *testing.T) {
	secret := "sk-" + strings.Repeat("s", 40)
	_, err := message.User(secret + "\xff")
	require.Error(t, err)
	require.NotContains(t, err.Error(), secret)
	_, err = message.User(secret + strings.Repeat("x", bound.MaxMessageBytes))
	require.True(t, errors.Is(err, bound.ErrExceeded))
	require.NotContains(t, err.Error(), secret)
}

// A text message costs one allocation, its parts slice: a 40-byte text
// part holds no room for a call or result. A message with calls
// costs one more, the calls they point to.
func TestUserMessageAllocatesOnce(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := message.User("hello"); err != nil {
			panic(err)
		}
	})
	require.LessOrEqual(t, allocs, 1.0)
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := message.Assistant("hello"); err != nil {
			panic(err)
		}
	})
	require.LessOrEqual(t, allocs, 1.0)
	c := call(t, "c1", `{"a":1}`)
	allocs = testing.AllocsPerRun(100, func() {
		if _, err := message.Assistant("hello", c); err != nil {
			panic(err)
		}
	})
	require.LessOrEqual(t, allocs, 2.0)
	require.LessOrEqual(t, unsafe.Sizeof(message.Part{}), uintptr(40))
}

func BenchmarkUser(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := message.User("hello, world"); err != nil {
			b.Fatal(err)
		}
	}
}
