package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
)

func TestR1_RunRefusesApprovalsNobodyCanAnswer(t *testing.T) {
	dir := t.TempDir()
	answers := filepath.Join(dir, "answers.jsonl")
	require.NoError(t, os.WriteFile(answers, []byte(`{"answer":"approve"}`+"\n"), 0o600))
	bad := filepath.Join(dir, "bad.jsonl")
	require.NoError(t, os.WriteFile(bad, []byte(`{"answer":"approve"}`+"\n\n"+`{"answer":"yes"}`+"\n"), 0o600))
	spec := filepath.Join(dir, "approve.yaml")
	require.NoError(t, os.WriteFile(spec, []byte(validSpec+"approve: mutating\n"), 0o600))
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"--json": {[]string{"run", "--approve", "mutating", "--json", "--no-store"},
			"--approve mutating asks a person before those tools run, but --json leaves no terminal to ask on: give the answers with --approve-from FILE (JSON lines), or run on a terminal without --json"},
		"no terminal": {[]string{"run", "--approve", "all", "--no-store"},
			"--approve all asks a person before those tools run, but standard input is not a terminal"},
		"the spec's policy": {[]string{"run", spec, "--json", "--no-store"},
			"--approve mutating asks a person before those tools run, but --json leaves no terminal"},
		"a bad policy":        {[]string{"run", "--approve", "fs.write,,x", "--no-store"}, "--approve: want never, mutating, all, or tool names"},
		"answers for nothing": {[]string{"run", "--approve-from", answers, "--no-store"}, "--approve-from: no call waits for approval"},
		"a bad timeout":       {[]string{"run", "--approve", "all", "--approve-timeout", "0s", "--approve-from", answers, "--no-store"}, "--approve-timeout: must be between"},
		"a bad answer":        {[]string{"run", "--approve", "all", "--approve-from", bad, "--no-store"}, bad + ":3: answer: want approve or deny"},
		"a missing file":      {[]string{"run", "--approve", "all", "--approve-from", filepath.Join(dir, "none"), "--no-store"}, "--approve-from: open"},
	} {
		t.Run(name, func(t *testing.T) {
			out, errOut, code := call(t, nil, c.args...)
			require.Equal(t, ExitUsage, code, errOut)
			require.Contains(t, errOut, c.want)
			require.Empty(t, out, "nothing started")
		})
	}
	// The spec's policy with answers from a file runs.
	out, errOut, code := call(t, nil, "run", spec, "--json", "--no-store", "--approve-from", answers)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, `"interaction.answered"`)
}

func TestR1_AnswersFileIsDecodedStrictly(t *testing.T) {
	got, err := decodeAnswers("a", []byte(`{"answer":"approve","tool":"fs.write"}`+"\n  \n"+`{"answer":"deny","call":"c","worker":"w","digest":"d"}`))
	require.NoError(t, err)
	require.Equal(t, []answerLine{{Answer: "approve", Tool: "fs.write"}, {Answer: "deny", Call: "c", Worker: "w", Digest: "d"}}, got)
	for _, bad := range []string{`{"answer":"approve","colour":1}`, `{"answer":"approve"} {}`, `[]`, `{"answer":"maybe"}`, `{`,
		strings.Repeat(" ", maxAnswersBytes+1)} {
		_, err := decodeAnswers("a", []byte(bad))
		require.Error(t, err, bad)
	}
}

func FuzzDecodeAnswers(f *testing.F) {
	f.Add([]byte(`{"answer":"approve"}` + "\n" + `{"answer":"deny","tool":"x"}`))
	f.Add([]byte("{\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := decodeAnswers("f", data)
		if err != nil {
			return
		}
		for _, a := range got {
			require.Contains(t, []string{"approve", "deny"}, a.Answer)
			_, err := json.Marshal(a)
			require.NoError(t, err)
		}
	})
}

// ask puts one approval question to b, as the guard does, and returns the
// answer's text.
func askApproval(t *testing.T, ctx context.Context, b *orchestrator.Approvals) (string, error) {
	t.Helper()
	tc, err := tool.NewCall("call-1", "fs.write", []byte(`{"path":"a","content":"x"}`))
	require.NoError(t, err)
	d := orchestrator.CallDigest("run-1", tc)
	prompt, err := json.Marshal(orchestrator.Approval{Type: orchestrator.ApprovalKind, Pair: "p", Worker: "writer\x1b[2J",
		Run: "run-1", Call: "call-1", Tool: "fs.write", Effect: "mutating", Replay: "idempotent",
		Arguments: json.RawMessage(`{"content":"x","path":"a"}`), ArgumentsBytes: 26, Digest: d})
	require.NoError(t, err)
	q, err := interaction.NewQuestion("ix-1", string(prompt), orchestrator.ApprovalAnswer(d, true), orchestrator.ApprovalAnswer(d, false))
	require.NoError(t, err)
	a, err := b.Ask(ctx, q)
	return a.Text(), err
}

func TestR1_TheTerminalAsksAndReadsYesOrNo(t *testing.T) {
	for _, c := range []struct {
		typed   string
		approve bool
	}{{"y\n", true}, {"YES\n", true}, {"n\n", false}, {"\n", false}, {"approve\n", false}} {
		t.Run(strings.TrimSpace(c.typed), func(t *testing.T) {
			in, typing := io.Pipe()
			var out syncBuffer
			ta := &terminalAnswers{in: in, out: &out, timeout: time.Minute, questions: make(chan orchestrator.Approval, 1)}
			b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: ta.enqueue})
			require.NoError(t, err)
			ta.b = b
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ta.run(ctx)
			// Typed once the question is shown: a line typed before it
			// is a stale answer, which the terminal drops.
			go func() {
				<-out.prompted()
				_, _ = io.WriteString(typing, c.typed)
			}()
			text, err := askApproval(t, ctx, b)
			require.NoError(t, err)
			require.Equal(t, c.approve, strings.HasPrefix(text, "approve:"))
			require.NoError(t, typing.Close()) // ends the reader
			shown := out.String()
			require.Contains(t, shown, "wants to run fs.write (mutating, idempotent)")
			require.Contains(t, shown, `arguments: {"content":"x","path":"a"}`)
			require.NotContains(t, shown, "\x1b", "model text reaches the terminal escaped")
		})
	}
}

func TestR1_TheTerminalsSilenceDenies(t *testing.T) {
	in, typing := io.Pipe()
	defer typing.Close()
	var out syncBuffer
	ta := &terminalAnswers{in: in, out: &out, timeout: time.Minute, questions: make(chan orchestrator.Approval, 1)}
	b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: ta.enqueue})
	require.NoError(t, err)
	ta.b = b
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ta.run(ctx)
	// The guard's deadline ends the question; nobody typed.
	actx, acancel := context.WithTimeout(ctx, time.Millisecond)
	defer acancel()
	_, err = askApproval(t, actx, b)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.Empty(t, b.Pending())
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader goroutine;
// prompted is closed once a question's prompt is written.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	prompt chan struct{}
}

func (s *syncBuffer) prompted() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.prompt == nil {
		s.prompt = make(chan struct{})
	}
	return s.prompt
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, err := s.b.Write(p)
	if bytes.Contains(p, []byte("[y/N]")) {
		if s.prompt == nil {
			s.prompt = make(chan struct{})
		}
		select {
		case <-s.prompt:
		default:
			close(s.prompt)
		}
	}
	return n, err
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
