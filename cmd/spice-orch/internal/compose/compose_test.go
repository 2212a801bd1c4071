package compose_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/providers/scripted"
	"github.com/spice-orch/spice-orch/store"
)

// run starts the built pair and returns its timeline as JSON lines, read
// through Subscribe from sequence 0, and its end.
func run(t *testing.T, p *compose.Pair) ([]byte, orchestrator.Result, error) {
	t.Helper()
	pair, err := orchestrator.Start(context.Background(), p.Config)
	require.NoError(t, err)
	sub, err := pair.Subscribe(context.Background(), 0)
	require.NoError(t, err)
	defer sub.Close()
	var out []byte
	for {
		e, err := sub.Next(context.Background())
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		out = append(e.AppendJSON(out), '\n')
	}
	res, err := pair.Wait(context.Background())
	return out, res, err
}

func TestBuiltinPairIsApprovedInTwoRoundsUnderOnePlan(t *testing.T) {
	ws := t.TempDir()
	p, err := compose.Build(compose.Options{Spec: spec.Builtin(), Workspace: ws, PairID: "pair-t1"})
	require.NoError(t, err)
	defer p.Close()
	require.Equal(t, []string{"fs.read", "fs.write", "text.stats"}, p.Tools)
	require.Equal(t, "plan-pair-t1", string(p.Plan.ID))
	require.Equal(t, spec.DefaultTask, p.Config.Task)
	require.Equal(t, "Reviewer feedback", p.Config.Policy.Heading("reviewer"), "a review frames the reviewer's answers as feedback")

	out, res, err := run(t, p)
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)
	require.Equal(t, 2, res.Rounds)
	require.Equal(t, 4, res.Runs)
	require.Equal(t, int64(6), res.ToolCalls)
	require.Contains(t, string(out), `"run_id":"pair-t1/writer/run-1"`)
	require.Contains(t, string(out), `"run_id":"pair-t1/reviewer/run-2"`)
	require.FileExists(t, filepath.Join(ws, scripted.DraftPath), "the writer's fs.write wrote into the workspace")
}

// The store records every run log and the pair timeline as a required
// observer; the recorded timeline replays byte for byte as it was read
// live.
func TestStoreRecordsTheTimelineByteForByte(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "runs.db"))
	require.NoError(t, err)
	defer st.Close()
	p, err := compose.Build(compose.Options{Spec: spec.Builtin(), Workspace: t.TempDir(), PairID: "pair-t2", Store: st})
	require.NoError(t, err)
	live, res, err := run(t, p)
	p.Close()
	require.NoError(t, err)
	require.Equal(t, orchestrator.ReasonApproved, res.Reason)

	var replay bytes.Buffer
	require.NoError(t, st.ReplayJSON(ctx, &replay, "pair-t2"))
	require.Equal(t, string(live), replay.String())

	rec, err := st.Pair(ctx, "pair-t2")
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
	require.Equal(t, "approved", rec.Summary.Reason)
	require.Len(t, rec.Runs, 4)
	// Each worker engine's own run log is recorded too.
	run, err := st.Run(ctx, "pair-t2/writer/run-1")
	require.NoError(t, err)
	require.NotEmpty(t, run.Events)
	require.Equal(t, "pair-t2/writer/run-1", run.Events[0].Log)
}

type captured struct {
	mu     sync.Mutex
	events []eventlog.Event
}

func (c *captured) Observe(_ context.Context, e eventlog.Event) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
	return nil
}

// The pair timeline's events reach the store under the pair ID, in
// sequence, with the bytes the timeline itself holds.
func TestStoreSeesTheTimelineUnderThePairID(t *testing.T) {
	ctx := context.Background()
	c := &captured{}
	p, err := compose.Build(compose.Options{Spec: spec.Builtin(), Workspace: t.TempDir(), PairID: "pair-t3", Store: c})
	require.NoError(t, err)
	defer p.Close()
	pair, err := orchestrator.Run(ctx, p.Config)
	require.NoError(t, err)
	_, err = pair.Wait(ctx)
	require.NoError(t, err)
	sub, err := pair.Subscribe(ctx, 0)
	require.NoError(t, err)
	var want []string
	for e, err := range sub.All(ctx) {
		require.NoError(t, err)
		want = append(want, string(e.AppendJSON(nil)))
	}
	var got []string
	c.mu.Lock()
	for _, e := range c.events {
		if e.Log() == "pair-t3" {
			require.Equal(t, uint64(len(got)+1), e.Seq())
			got = append(got, string(e.AppendJSON(nil)))
		}
	}
	c.mu.Unlock()
	require.NotEmpty(t, got)
	require.Equal(t, want, got)
}

func TestBuildRefusesWhatTheUserMustFix(t *testing.T) {
	withScript := spec.Builtin()
	withScript.Workers[0].Script = scripted.Script{Steps: []scripted.Step{{Calls: []scripted.CallSpec{{Name: "net.fetch"}}}}}
	openai := spec.Builtin()
	openai.Workers[1] = spec.Worker{Role: "reviewer", Provider: spec.OpenAI, Model: "gpt-4o-mini", MaxTurns: 2}
	const key = "sk-test-SECRET 123" // a space: not a valid key
	cases := map[string]struct {
		o    compose.Options
		want string
	}{
		"unknown tool": {compose.Options{Spec: withScript, Workspace: t.TempDir(), PairID: "p"},
			"spec: workers[0].script[0].calls[0].name: calls the tool net.fetch, which the plan does not have (it has fs.read, fs.write, text.stats)"},
		"no workspace": {compose.Options{Spec: spec.Builtin(), Workspace: filepath.Join(t.TempDir(), "missing"), PairID: "p"}, ""},
		"no key": {compose.Options{Spec: openai, Workspace: t.TempDir(), PairID: "p"},
			"workers[1]: provider openai needs OPENAI_API_KEY (or a base_url / OPENAI_BASE_URL for a server without keys)"},
		"bad key": {compose.Options{Spec: openai, Workspace: t.TempDir(), PairID: "p",
			Getenv: func(k string) string { return map[string]string{"OPENAI_API_KEY": key}[k] }}, ""},
		"huge task": {compose.Options{Spec: spec.Builtin(), Workspace: t.TempDir(), PairID: "p", Task: strings.Repeat("x", 300<<10)}, ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p, err := compose.Build(c.o)
			require.Nil(t, p)
			var ce *compose.ConfigError
			require.True(t, errors.As(err, &ce), "%T: %v", err, err)
			require.NotContains(t, err.Error(), "SECRET")
			if c.want != "" {
				require.Equal(t, c.want, err.Error())
			}
		})
	}
	_, err := compose.Build(compose.Options{Spec: spec.Builtin(), Workspace: t.TempDir(), PairID: "bad id"})
	require.Error(t, err)
	require.Error(t, compose.Check(withScript))
	require.NoError(t, compose.Check(spec.Builtin()))
}

func TestOpenAIWorkerBuildsFromTheEnvironment(t *testing.T) {
	s := spec.Builtin()
	s.Workers[1] = spec.Worker{Role: "reviewer", Provider: spec.OpenAI, Model: "gpt-4o-mini", MaxTurns: 2,
		OpenAI: spec.OpenAIOptions{BaseURL: "http://127.0.0.1:1/v1", Timeout: time.Second}}
	p, err := compose.Build(compose.Options{Spec: s, Workspace: t.TempDir(), PairID: "p"})
	require.NoError(t, err, "a base_url of its own needs no key")
	p.Close()
}

func TestSpecPolicyAndLimitsReachThePair(t *testing.T) {
	s := spec.Builtin()
	s.Pattern = spec.Relay
	s.Handoff = spec.Handoff{MaxBytes: 1000, Over: spec.OverTruncate, DoneMarker: "LGTM", Headings: map[string]string{"reviewer": "Notes"}}
	s.Limits = spec.Limits{Tokens: 10, ToolCalls: 2, WallTime: time.Minute}
	p, err := compose.Build(compose.Options{Spec: s, Workspace: t.TempDir(), PairID: "p", Task: "Do it."})
	require.NoError(t, err)
	defer p.Close()
	c := p.Config
	require.Equal(t, orchestrator.Relay, c.Pattern)
	require.Equal(t, "Do it.", c.Task)
	require.Equal(t, 1000, c.Policy.MaxBytes())
	require.Equal(t, "LGTM", c.Policy.DoneMarker())
	require.Equal(t, "Notes", c.Policy.Heading("reviewer"))
	require.Equal(t, orchestrator.Budget{Tokens: 10, ToolCalls: 2, WallTime: time.Minute}, c.Budget)
	require.Equal(t, orchestrator.StopAtLimit, c.OnLimit)

	s.Limits.FinalAnswer, s.Limits.FinalAnswerReserve = true, 0.3
	p2, err := compose.Build(compose.Options{Spec: s, Workspace: t.TempDir(), PairID: "p", Task: "Do it."})
	require.NoError(t, err)
	defer p2.Close()
	require.Equal(t, orchestrator.AnswerAtLimit, p2.Config.OnLimit)
	require.Equal(t, 0.3, p2.Config.FinalAnswerReserve)
}

func TestNewPairIDIsUniqueAndSortsByTime(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	a, err := compose.NewPairID(now, nil)
	require.NoError(t, err)
	b, err := compose.NewPairID(now, nil)
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.Regexp(t, regexp.MustCompile(`^pair-20261130-010203-[0-9a-f]{8}$`), a)
	c, err := compose.NewPairID(now, bytes.NewReader([]byte{1, 2, 3, 4}))
	require.NoError(t, err)
	require.Equal(t, "pair-20261130-010203-01020304", c)
	_, err = compose.NewPairID(now, bytes.NewReader(nil))
	require.Error(t, err)
}
