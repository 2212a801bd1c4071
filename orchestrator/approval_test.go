package orchestrator_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/tools"
)

// writePair is a relay whose writer asks fs.write (the real tool, on dir)
// for out.txt and then answers; the reviewer answers.
func writePair(t *testing.T, dir string, broker interaction.Broker, ac orchestrator.ApprovalConfig) *harness {
	t.Helper()
	fsw, err := tools.NewFSWrite(tools.Config{Root: dir})
	require.NoError(t, err)
	h := newHarness(t, orchestrator.Relay,
		script{
			{enginetest.Call("call-1", tools.NameFSWrite, `{"path":"out.txt","content":"hello"}`), enginetest.Done(1, 1)},
			enginetest.Answer("wrote it"),
		},
		script{enginetest.Answer("fine")},
		fsw, enginetest.Echo())
	h.cfg.First.Engine.Broker = broker
	h.cfg.Second.Engine.Broker = broker
	h.cfg.Approval = ac
	return h
}

// toolOutcome returns the relayed tool.completed of the pair's one call.
func toolOutcome(t *testing.T, evs []eventlog.Event) event.ToolCompleted {
	t.Helper()
	done := relayed(evs, event.KindToolCompleted)
	require.Len(t, done, 1, "the call ends with a result: %v", kinds(evs))
	c, ok := done[0].Payload().(event.ToolCompleted)
	require.True(t, ok)
	return c
}

func TestR1_DigestCoversToolArgumentsCallAndRun(t *testing.T) {
	call := func(callID, name, args string) tool.Call {
		c, err := tool.NewCall(id.Call(callID), name, []byte(args))
		require.NoError(t, err)
		return c
	}
	base := orchestrator.CallDigest("run-1", call("call-1", "fs.write", `{"path":"a","content":"x"}`))
	require.Len(t, base, 64)
	// Another spelling of the same arguments is the same call.
	require.Equal(t, base, orchestrator.CallDigest("run-1", call("call-1", "fs.write", `{ "content":"x", "path":"a" }`)))
	for _, other := range []string{
		orchestrator.CallDigest("run-1", call("call-1", "fs.write", `{"path":"b","content":"x"}`)),
		orchestrator.CallDigest("run-1", call("call-1", "fs.other", `{"path":"a","content":"x"}`)),
		orchestrator.CallDigest("run-1", call("call-2", "fs.write", `{"path":"a","content":"x"}`)),
		orchestrator.CallDigest("run-2", call("call-1", "fs.write", `{"path":"a","content":"x"}`)),
	} {
		require.NotEqual(t, base, other)
	}
}

func TestR1_AnAnswerApprovesOnlyTheCallItWasAskedAbout(t *testing.T) {
	dir := t.TempDir()
	var tried []error
	var b *orchestrator.Approvals
	b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: func(a orchestrator.Approval) {
		// An approval of the same call with other arguments, of another
		// call ID and of another run: none of them answers this question.
		for _, c := range []struct{ run, call, args string }{
			{string(a.Run), string(a.Call), `{"path":"other.txt","content":"hello"}`},
			{string(a.Run), "call-2", `{"path":"out.txt","content":"hello"}`},
			{"another-run", string(a.Call), `{"path":"out.txt","content":"hello"}`},
		} {
			tc, err := tool.NewCall(id.Call(c.call), a.Tool, []byte(c.args))
			require.NoError(t, err)
			tried = append(tried, b.Answer(a.Pair, a.Question, orchestrator.CallDigest(id.Run(c.run), tc), true))
		}
		// Another pair's question of the same ID is not this one.
		tried = append(tried, b.Answer("pair-2", a.Question, a.Digest, true))
		// The question's own digest answers it, once.
		require.NoError(t, b.Answer(a.Pair, a.Question, a.Digest, false))
		tried = append(tried, b.Answer(a.Pair, a.Question, a.Digest, true))
	}})
	require.NoError(t, err)
	h := writePair(t, dir, b, orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating})
	p, _, err := h.run(t)
	require.NoError(t, err)
	require.Equal(t, []error{orchestrator.ErrDigestMismatch, orchestrator.ErrDigestMismatch, orchestrator.ErrDigestMismatch,
		orchestrator.ErrUnknownQuestion, orchestrator.ErrAnswered}, tried)
	require.Equal(t, orchestrator.CodeApprovalDenied, toolOutcome(t, timeline(t, p)).Problem.Code())
	require.NoFileExists(t, filepath.Join(dir, "out.txt"))
	require.Empty(t, b.Pending())
}

// answerer is a broker that answers every question with what answer
// returns for it.
type answerer func(q interaction.Question) string

func (f answerer) Ask(_ context.Context, q interaction.Question) (interaction.Answer, error) {
	return interaction.NewAnswer(q.ID(), f(q)), nil
}

func TestR1_AnAnswerBoundToAnotherCallIsRefusedByTheKernel(t *testing.T) {
	// A broker that bypasses Approvals and answers "approve" for a changed
	// call: the answer is not one of the question's choices, so the
	// kernel refuses it and the call does not run.
	dir := t.TempDir()
	var asked []orchestrator.Approval
	b := answerer(func(q interaction.Question) string {
		a, err := orchestrator.ParseApproval(q)
		require.NoError(t, err)
		asked = append(asked, a)
		tc, err := tool.NewCall(a.Call, a.Tool, []byte(`{"path":"../escape.txt","content":"hello"}`))
		require.NoError(t, err)
		return orchestrator.ApprovalAnswer(orchestrator.CallDigest(a.Run, tc), true)
	})
	h := writePair(t, dir, b, orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating})
	p, _, err := h.run(t)
	require.NoError(t, err)
	evs := timeline(t, p)
	require.Equal(t, orchestrator.CodeApprovalFailed, toolOutcome(t, evs).Problem.Code())
	require.Len(t, relayed(evs, event.KindInteractionFailed), 1)
	require.NoFileExists(t, filepath.Join(dir, "out.txt"))
	require.Len(t, asked, 1)
	a := asked[0]
	require.Equal(t, orchestrator.Approval{
		Question: a.Question, Type: orchestrator.ApprovalKind, Pair: "pair-1", Worker: "writer", Run: a.Run,
		Call: "call-1", Tool: "fs.write", Effect: "mutating", Replay: "idempotent",
		Arguments: []byte(`{"content":"hello","path":"out.txt"}`), ArgumentsBytes: 36, Digest: a.Digest,
	}, a)
	tc, err := tool.NewCall("call-1", "fs.write", []byte(`{"path":"out.txt","content":"hello"}`))
	require.NoError(t, err)
	require.Equal(t, orchestrator.CallDigest(a.Run, tc), a.Digest)
	require.NotEmpty(t, a.Run)
}

func TestR1_ADeniedOrTimedOutMutatingCallNeverRuns(t *testing.T) {
	for _, c := range []struct {
		name    string
		approve bool
		answer  bool
		code    string
		end     string
	}{
		{name: "approved", approve: true, answer: true, end: event.KindInteractionAnswered},
		{name: "denied", answer: true, code: orchestrator.CodeApprovalDenied, end: event.KindInteractionAnswered},
		{name: "timed_out", code: orchestrator.CodeApprovalTimeout, end: event.KindInteractionCancelled},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			var b *orchestrator.Approvals
			b, err := orchestrator.NewApprovals(orchestrator.ApprovalsConfig{OnQuestion: func(a orchestrator.Approval) {
				require.Equal(t, []orchestrator.Approval{a}, b.Pending())
				if c.answer {
					require.NoError(t, b.Answer(a.Pair, a.Question, a.Digest, c.approve))
				}
			}})
			require.NoError(t, err)
			// Nobody answers the timed-out question: the guard's own
			// deadline ends it. An answered question gets a deadline no
			// loaded machine reaches before the answer.
			h := writePair(t, dir, b, orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating, Timeout: time.Millisecond})
			if c.answer {
				h.cfg.Approval.Timeout = time.Minute
			}
			p, _, err := h.run(t)
			require.NoError(t, err)
			evs := timeline(t, p)
			requireTimeline(t, evs)
			got := toolOutcome(t, evs)
			require.Equal(t, c.code, got.Problem.Code())
			// The question and its end are in the pair timeline, between
			// the call's start and its result.
			require.Len(t, relayed(evs, event.KindInteractionStarted), 1)
			require.Len(t, relayed(evs, c.end), 1)
			content, err := os.ReadFile(filepath.Join(dir, "out.txt"))
			if c.approve {
				require.NoError(t, err)
				require.Equal(t, "hello", string(content))
				return
			}
			require.ErrorIs(t, err, os.ErrNotExist, "the tool never ran")
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Empty(t, entries, "not even a temporary file")
		})
	}
}

func TestR1_PoliciesAskAboutTheCallsTheyName(t *testing.T) {
	for _, c := range []struct {
		policy string
		asks   int
	}{{"never", 0}, {"mutating", 1}, {"all", 2}, {"echo", 1}, {"fs.write, echo", 2}} {
		t.Run(c.policy, func(t *testing.T) {
			pol, err := orchestrator.ParseApprovalPolicy(c.policy)
			require.NoError(t, err)
			var mu sync.Mutex
			var asked []string
			b := answerer(func(q interaction.Question) string {
				a, err := orchestrator.ParseApproval(q)
				require.NoError(t, err)
				mu.Lock()
				asked = append(asked, a.Tool)
				mu.Unlock()
				return orchestrator.ApprovalAnswer(a.Digest, true)
			})
			h := writePair(t, t.TempDir(), b, orchestrator.ApprovalConfig{Policy: pol})
			h.first = enginetest.NewProvider(
				[]model.Item{enginetest.Call("call-1", "fs.write", `{"path":"a.txt","content":"x"}`), enginetest.Call("call-2", "echo", `{}`), enginetest.Done(1, 1)},
				enginetest.Answer("done"))
			h.cfg.First.Engine.Provider = h.first
			_, _, err = h.run(t)
			require.NoError(t, err)
			require.Len(t, asked, c.asks)
		})
	}
	for _, bad := range []string{"", ",", "fs.write,fs.write", "bad name"} {
		_, err := orchestrator.ParseApprovalPolicy(bad)
		require.Error(t, err, "%q", bad)
	}
}

func TestR5_EveryCallCarriesTheKeyOfItsPairRunAndCall(t *testing.T) {
	var mu sync.Mutex
	var keys []idempotency.Key
	keyed := enginetest.Tool{Def: enginetest.Echo().Def, Fn: func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		k, ok := idempotency.FromContext(ctx)
		require.True(t, ok, "a compiled tool receives the key on the call's context")
		mu.Lock()
		keys = append(keys, k)
		mu.Unlock()
		return tool.NewResult(call.ID(), "ok")
	}}
	h := newHarness(t, orchestrator.Relay,
		script{{enginetest.Call("call-1", "echo", `{}`), enginetest.Done(1, 1)}, enginetest.Answer("a")},
		script{{enginetest.Call("call-1", "echo", `{}`), enginetest.Done(1, 1)}, enginetest.Answer("b")},
		keyed)
	p, _, err := h.run(t)
	require.NoError(t, err)
	started := relayed(timeline(t, p), event.KindToolStarted)
	require.Len(t, started, 2)
	require.Len(t, keys, 2)
	for i, s := range started {
		require.Equal(t, idempotency.Derive("pair-1", s.RunID(), "call-1"), keys[i])
	}
	require.NotEqual(t, keys[0], keys[1], "one call ID in two runs is two calls")
}

func FuzzParseApproval(f *testing.F) {
	tc, err := tool.NewCall("call-1", "fs.write", []byte(`{"path":"a","content":"x"}`))
	if err != nil {
		f.Fatal(err)
	}
	d := orchestrator.CallDigest("run-1", tc)
	f.Add(`{"type":"spice-orch.approval/v1","pair":"p","worker":"w","run":"run-1","call":"call-1","tool":"fs.write","effect":"mutating","replay":"idempotent","arguments":{"a":1},"arguments_bytes":7,"digest":"`+d+`"}`, d)
	f.Add(`{"type":"spice-orch.approval/v1"}`, "")
	f.Fuzz(func(t *testing.T, prompt, digest string) {
		q, err := interaction.NewQuestion("ix-1", prompt, orchestrator.ApprovalAnswer(digest, true), orchestrator.ApprovalAnswer(digest, false))
		if err != nil {
			return
		}
		a, err := orchestrator.ParseApproval(q)
		if err != nil {
			return
		}
		require.Equal(t, digest, a.Digest)
		require.Equal(t, id.Interaction("ix-1"), a.Question)
	})
}

func TestR1_APolicyWithoutABrokerIsRefused(t *testing.T) {
	h := writePair(t, t.TempDir(), nil, orchestrator.ApprovalConfig{Policy: orchestrator.ApproveAll})
	_, err := orchestrator.Run(context.Background(), h.cfg)
	require.ErrorIs(t, err, bound.ErrInvalid)
	require.ErrorContains(t, err, "pair.first.engine.broker")
	h.cfg.Approval.Timeout = -time.Second
	h.cfg.First.Engine.Broker, h.cfg.Second.Engine.Broker = answerer(nil), answerer(nil)
	_, err = orchestrator.Run(context.Background(), h.cfg)
	require.ErrorContains(t, err, "pair.approval.timeout")
}

func TestR1_LargeArgumentsAreShownInPartAndDigestedWhole(t *testing.T) {
	content := strings.Repeat("<", 40<<10) // escaped as six bytes each in a prompt
	raw := []byte(`{"path":"big.txt","content":"` + content + `"}`)
	var asked []orchestrator.Approval
	b := answerer(func(q interaction.Question) string {
		a, err := orchestrator.ParseApproval(q)
		require.NoError(t, err)
		asked = append(asked, a)
		return orchestrator.ApprovalAnswer(a.Digest, true)
	})
	dir := t.TempDir()
	h := writePair(t, dir, b, orchestrator.ApprovalConfig{Policy: orchestrator.ApproveMutating})
	h.first = enginetest.NewProvider(
		[]model.Item{enginetest.Call("call-1", tools.NameFSWrite, string(raw)), enginetest.Done(1, 1)},
		enginetest.Answer("done"))
	h.cfg.First.Engine.Provider = h.first
	_, _, err := h.run(t)
	require.NoError(t, err)
	require.Len(t, asked, 1)
	a := asked[0]
	require.Nil(t, a.Arguments)
	require.Len(t, a.ArgumentsPreview, 1024)
	require.Equal(t, len(raw), a.ArgumentsBytes)
	tc, err := tool.NewCall("call-1", tools.NameFSWrite, raw)
	require.NoError(t, err)
	require.Equal(t, orchestrator.CallDigest(a.Run, tc), a.Digest)
	got, err := os.ReadFile(filepath.Join(dir, "big.txt"))
	require.NoError(t, err)
	require.Equal(t, content, string(got))
}
