package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// checkBuiltinPair asserts the shape of the built-in pair's JSON lines
// (one plan for both workers, two runs each, tool calls on both sides, a
// handoff with its provenance, approval) and returns the pair ID.
func checkBuiltinPair(t *testing.T, out string) string {
	t.Helper()
	ls := timeline(t, out)
	require.Equal(t, "pair.started", ls[0].Kind)
	pairID := field[string](t, ls[0].Payload, "pair_id")
	planID := field[string](t, ls[0].Payload, "plan_id")
	require.NotEmpty(t, planID)
	require.Equal(t, map[string]string{"first": "writer", "second": "reviewer"}, field[map[string]string](t, ls[0].Payload, "workers"))

	last := ls[len(ls)-1]
	require.Equal(t, "pair.completed", last.Kind)
	require.Equal(t, "approved", field[string](t, last.Payload, "reason"))

	runStarted := map[string]int{}
	tools := map[string]int{}
	handoffs := 0
	for _, l := range ls {
		switch l.Kind {
		case "run.started":
			runStarted[l.Relay.Worker]++
			require.Equal(t, planID, field[string](t, l.Relay.Payload, "plan_id"), "every run uses the pair's plan")
			require.True(t, strings.HasPrefix(l.Relay.RunID, pairID+"/"+l.Relay.Worker+"/"))
		case "tool.completed":
			tools[l.Relay.Worker]++
		case "pair.handoff":
			handoffs++
			require.NotEmpty(t, field[string](t, l.Payload, "sha256"))
			require.NotZero(t, field[int](t, l.Payload, "bytes"))
			require.NotEmpty(t, field[string](t, l.Payload, "from_run_id"))
		}
	}
	require.Equal(t, map[string]int{"writer": 2, "reviewer": 2}, runStarted)
	require.GreaterOrEqual(t, tools["writer"], 1)
	require.GreaterOrEqual(t, tools["reviewer"], 1)
	require.GreaterOrEqual(t, handoffs, 1)
	return pairID
}

func TestRunBuiltinPairJSONWithoutStore(t *testing.T) {
	t.Parallel()
	e := env(t)
	r := spiceOrch(t, e, "run", "--json", "--no-store")
	require.Equal(t, 0, r.code, r.stderr)
	require.Empty(t, r.stderr)
	checkBuiltinPair(t, r.stdout)
	// Nothing was recorded: no default store appeared.
	home := homeOf(e)
	_, err := os.Stat(filepath.Join(home, "state", "spice-orch", "runs.db"))
	require.ErrorIs(t, err, os.ErrNotExist)
}

// A recorded pair replays byte for byte as `run --json` printed it, and
// `runs list` and `runs show` find it.
func TestRunRecordsAndReplaysByteForByte(t *testing.T) {
	t.Parallel()
	e := env(t)
	db := filepath.Join(t.TempDir(), "runs.db")
	r := spiceOrch(t, e, "run", "--json", "--store", db)
	require.Equal(t, 0, r.code, r.stderr)
	pairID := checkBuiltinPair(t, r.stdout)

	replay := spiceOrch(t, e, "runs", "replay", pairID, "--json", "--store", db)
	require.Equal(t, 0, replay.code, replay.stderr)
	require.Equal(t, r.stdout, replay.stdout, "byte-identical replay")

	list := spiceOrch(t, e, "runs", "list", "--store", db)
	require.Equal(t, 0, list.code, list.stderr)
	require.Regexp(t, `(?m)^`+pairID+`\s+completed\s+approved\s+writer,reviewer\s`, list.stdout)

	show := spiceOrch(t, e, "runs", "show", pairID, "--store", db)
	require.Equal(t, 0, show.code, show.stderr)
	require.Contains(t, show.stdout, "status    completed (approved)")
	require.Contains(t, show.stdout, pairID+"/reviewer/run-2")
	require.Contains(t, show.stdout, "pair completed: approved")

	run := spiceOrch(t, e, "runs", "show", pairID+"/writer/run-1", "--store", db)
	require.Equal(t, 0, run.code, run.stderr)
	require.Contains(t, run.stdout, "fs.write  mutating  completed")

	readable := spiceOrch(t, e, "runs", "replay", pairID, "--store", db, "--read-only")
	require.Equal(t, 0, readable.code, readable.stderr)
	require.Contains(t, readable.stdout, "[handoff]  writer -> reviewer, round 1")

	missing := spiceOrch(t, e, "runs", "show", "pair-nope", "--store", db)
	require.Equal(t, 1, missing.code)
	require.Contains(t, missing.stderr, "pair-nope: not found")
}

// On a terminal-less stdout the readable timeline is plain text; the
// default store is used and named.
func TestRunReadableTimelineUsesTheDefaultStore(t *testing.T) {
	t.Parallel()
	e := env(t)
	r := spiceOrch(t, e, "run", "--task", "Write a limerick about goroutines.")
	require.Equal(t, 0, r.code, r.stderr)
	out := r.stdout
	for _, want := range []string{
		"spice-orch: built-in pair",
		"task: Write a limerick about goroutines.",
		"(temporary, removed at the end",
		"[writer]   turn 1",
		"[writer]   tool fs.write (mutating)",
		"[reviewer] tool text.stats (read-only)",
		"[handoff]  reviewer -> writer, round 1",
		"[reviewer] | APPROVED",
		"pair completed: approved",
		"2 rounds, 4 runs, 6 tool calls, 1860 in / 640 out tokens, ",
		"recorded: spice-orch runs show pair-",
	} {
		require.Contains(t, out, want)
	}
	require.NotContains(t, out, "\x1b[", "no colors off a terminal")
	home := homeOf(e)
	require.FileExists(t, filepath.Join(home, "state", "spice-orch", "runs.db"))
	list := spiceOrch(t, e, "runs", "list")
	require.Equal(t, 0, list.code, list.stderr)
	require.Contains(t, list.stdout, "completed  approved")
}

func TestRunExampleReviewPairOffline(t *testing.T) {
	t.Parallel()
	ws := filepath.Join(t.TempDir(), "out")
	r := spiceOrch(t, env(t), "run", "../../examples/review-pair.yaml", "--json", "--no-store", "--workspace", ws)
	require.Equal(t, 0, r.code, r.stderr)
	ls := timeline(t, r.stdout)
	require.Equal(t, "approved", field[string](t, ls[len(ls)-1].Payload, "reason"))
	notes, err := os.ReadFile(filepath.Join(ws, "NOTES.md"))
	require.NoError(t, err, "--workspace keeps what the pair wrote")
	require.Contains(t, string(notes), "## Breaking changes")
}

func writeSpec(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

func TestBadSpecExitsTwoWithItsLine(t *testing.T) {
	t.Parallel()
	path := writeSpec(t, t.TempDir(), "bad.yaml", `version: 1
pattern: review
workers:
  - role: writer
    provider: scripted
  - role: reviewer
    provider: scripted
    max_turns: lots
`)
	for _, cmd := range [][]string{{"run", path}, {"validate", path}, {"run", path, "--json"}} {
		r := spiceOrch(t, env(t), cmd...)
		require.Equal(t, 2, r.code, cmd)
		require.Equal(t, "spice-orch: "+path+":8: workers[1].max_turns: want an integer, got a string\n", r.stderr)
		require.Empty(t, r.stdout)
	}
	tool := writeSpec(t, t.TempDir(), "tool.yaml", `pattern: relay
workers:
  - role: writer
    provider: scripted
    script: [{calls: [{name: shell.exec}]}]
  - role: reviewer
    provider: scripted
`)
	r := spiceOrch(t, env(t), "validate", tool)
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, tool+":5: workers[0].script[0].calls[0].name: calls the tool shell.exec, which the plan does not have")
	r = spiceOrch(t, env(t), "run", filepath.Join(t.TempDir(), "missing.yaml"))
	require.Equal(t, 2, r.code)
	require.Contains(t, r.stderr, "missing.yaml")
}

func TestValidateExamples(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"review-pair.yaml", "openai-pair.yaml", "mcp-pair.yaml"} {
		r := spiceOrch(t, env(t), "validate", "../../examples/"+name)
		require.Equal(t, 0, r.code, r.stderr)
		require.Contains(t, r.stdout, name+": valid: pattern review")
	}
}

// A scripted writer that tries to write outside its workspace gets a
// model-visible problem; nothing is written outside.
func TestToolCannotEscapeTheWorkspace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := writeSpec(t, dir, "escape.yaml", `pattern: relay
workspace: ws
workers:
  - role: writer
    provider: scripted
    script:
      - calls:
          - name: fs.write
            arguments: {path: ../outside.txt, content: "escaped"}
      - text: I could not write outside the workspace.
  - role: reviewer
    provider: scripted
    script:
      - text: Noted.
`)
	r := spiceOrch(t, env(t), "run", path, "--json", "--no-store")
	require.Equal(t, 0, r.code, r.stderr)
	ls := timeline(t, r.stdout)
	var problems []string
	for _, l := range ls {
		if l.Kind == "tool.completed" {
			p := field[map[string]string](t, l.Relay.Payload, "problem")
			problems = append(problems, p["code"])
		}
	}
	require.Equal(t, []string{"path_outside_workspace"}, problems)
	require.Equal(t, "pair.completed", ls[len(ls)-1].Kind, "a model-visible problem does not end the pair")
	_, err := os.Stat(filepath.Join(dir, "outside.txt"))
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was written outside the workspace")
	entries, err := os.ReadDir(filepath.Join(dir, "ws"))
	require.NoError(t, err)
	require.Empty(t, entries)
}

// SIGINT in the middle of a run cancels the pair: exit 130, one
// pair.cancelled, and it is the last line. SIGTERM does the same.
func TestSIGINTCancelsThePair(t *testing.T) {
	t.Parallel()
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) { cancelledBy(t, sig) })
	}
}

func cancelledBy(t *testing.T, sig os.Signal) {
	db := filepath.Join(t.TempDir(), "runs.db")
	e := env(t, "SPICE_ORCH_PAUSE_AFTER=tool.completed")
	signalled := false
	wait := started(t, e, func(cmd *exec.Cmd, line string) {
		if strings.Contains(line, "holding the pair after event") && !signalled {
			signalled = true
			require.NoError(t, cmd.Process.Signal(sig))
		}
	}, "run", "--json", "--store", db)
	r := wait()
	require.True(t, signalled, r.stderr)
	require.Equal(t, 130, r.code, r.stderr)
	ls := timeline(t, r.stdout)
	last := ls[len(ls)-1]
	require.Equal(t, "pair.cancelled", last.Kind)
	require.Equal(t, "cancelled", field[string](t, last.Payload, "reason"))
	kinds := make([]string, len(ls))
	for i, l := range ls {
		kinds[i] = l.Kind
	}
	require.Contains(t, kinds, "run.cancelled", "the active run was cancelled, not left open")
	require.NotContains(t, kinds, "pair.handoff", "no further run started")
	require.Contains(t, r.stderr, "spice-orch: pair cancelled")

	pairID := field[string](t, ls[0].Payload, "pair_id")
	show := spiceOrch(t, e, "runs", "show", pairID, "--store", db)
	require.Equal(t, 0, show.code, show.stderr)
	require.Contains(t, show.stdout, "status    cancelled (cancelled)")
}

// A process killed in the middle of a mutating call leaves a pair that
// `runs show` reports interrupted, with the call uncertain.
func TestRunsShowReportsAnInterruptedPairAndItsUncertainCall(t *testing.T) {
	t.Parallel()
	db := filepath.Join(t.TempDir(), "runs.db")
	e := env(t, "SPICE_ORCH_PAUSE_AFTER=tool.started")
	killed := false
	wait := started(t, e, func(cmd *exec.Cmd, line string) {
		if strings.Contains(line, "holding the pair after event") && !killed {
			killed = true
			require.NoError(t, cmd.Process.Kill())
		}
	}, "run", "--json", "--store", db)
	r := wait()
	require.True(t, killed)
	require.Equal(t, -1, r.code, "killed")
	pairID := field[string](t, timelineHead(t, r.stdout).Payload, "pair_id")

	show := spiceOrch(t, e, "runs", "show", pairID, "--store", db)
	require.Equal(t, 0, show.code, show.stderr)
	require.Contains(t, show.stdout, "status    interrupted")
	require.Contains(t, show.stdout, "interrupted: the process running this pair ended before the pair's terminal was recorded.")
	require.Contains(t, show.stdout, "uncertain tool calls")
	require.Regexp(t, pairID+`/writer/run-1: fs.write \(call .*, mutating\), started at run sequence 5, no outcome recorded`, show.stdout)

	list := spiceOrch(t, e, "runs", "list", "--store", db, "--status", "interrupted")
	require.Equal(t, 0, list.code, list.stderr)
	require.Contains(t, list.stdout, pairID)
}

// timelineHead parses the first line of a timeline that was cut short.
func timelineHead(t *testing.T, out string) line {
	t.Helper()
	first, _, _ := strings.Cut(out, "\n")
	ls := timelineLines(t, first)
	require.NotEmpty(t, ls)
	return ls[0]
}

// A pair that ends without approval, or over its budget, fails: exit 1,
// with the reason in the terminal and on stderr.
func TestFailedPairsExitOne(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	never := writeSpec(t, dir, "never.yaml", `pattern: review
workers:
  - role: writer
    provider: scripted
    script: [{text: "A draft."}]
  - role: critic
    provider: scripted
    script: [{text: "Not yet."}]
limits:
  max_rounds: 1
`)
	budget := writeSpec(t, dir, "budget.yaml", `pattern: review
workers:
  - role: writer
    provider: scripted
  - role: reviewer
    provider: scripted
limits:
  budget: {tool_calls: 1}
`)
	for path, reason := range map[string]string{never: "max_rounds", budget: "budget_exhausted"} {
		r := spiceOrch(t, env(t), "run", path, "--json", "--no-store")
		require.Equal(t, 1, r.code, r.stderr)
		ls := timeline(t, r.stdout)
		last := ls[len(ls)-1]
		require.Equal(t, "pair.failed", last.Kind)
		require.Equal(t, reason, field[string](t, last.Payload, "reason"))
		require.Contains(t, r.stderr, "spice-orch: orchestrator: pair ended: "+reason)
	}
}
