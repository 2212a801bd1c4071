package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

func TestMain(m *testing.M) {
	serveMCPIfAsked()
	goleak.VerifyTestMain(m)
}

// call runs the command line in process with a private environment.
func call(t *testing.T, vars map[string]string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	home := t.TempDir()
	getenv := func(k string) string {
		if v, ok := vars[k]; ok {
			return v
		}
		if k == "HOME" {
			return home
		}
		return ""
	}
	var out, errOut bytes.Buffer
	code = Main(context.Background(), args, Env{Stdout: &out, Stderr: &errOut, Getenv: getenv})
	return out.String(), errOut.String(), code
}

// Every command has a short description and examples, and --help shows
// them.
func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	root := newRoot(Env{Stdout: &bytes.Buffer{}, Stderr: &bytes.Buffer{}, Getenv: os.Getenv})
	var walk func(*cobra.Command)
	seen := 0
	walk = func(c *cobra.Command) {
		require.NotEmpty(t, c.Short, c.CommandPath())
		require.NotEmpty(t, c.Example, c.CommandPath())
		seen++
		args := append(strings.Fields(c.CommandPath())[1:], "--help")
		out, errOut, code := call(t, nil, args...)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "Examples:", c.CommandPath())
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	require.Equal(t, 22, seen, "spice-orch, run, validate, runs, runs list|show|replay|diff|resume|export-trace, version, serve, worker, plugin, plugin digest|describe|pin|conformance|dev, mcp, mcp digest|describe")
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, errOut, code := call(t, nil, "completion", shell)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, "spice-orch", shell)
	}
}

func TestVersion(t *testing.T) {
	out, _, code := call(t, nil, "version")
	require.Equal(t, 0, code)
	require.Regexp(t, `^spice-orch \S+ \(go[^,]+, \w+/\w+\)\n$`, out)
	Version = "v9.9.9"
	defer func() { Version = "" }()
	out, _, _ = call(t, nil, "version")
	require.True(t, strings.HasPrefix(out, "spice-orch v9.9.9 ("))
}

func TestBadUsageExitsTwo(t *testing.T) {
	for _, args := range [][]string{
		{"nope"},
		{"--bogus"},
		{"run", "a.yaml", "b.yaml"},
		{"run", "--store", "x.db", "--no-store"},
		{"run", "--task", ""},
		{"run", "--task"},
		{"validate"},
		{"runs", "show"},
		{"runs", "replay", "a", "b"},
		{"runs", "list", "--status", "weird"},
		{"runs", "list", "--limit", "many"},
		{"version", "extra"},
		{"plugin", "dev"},
		{"plugin", "dev", "--debounce", "-1s", "x"},
		{"plugin", "dev", "--run", "no-such-spec.yaml", "x"},
	} {
		_, errOut, code := call(t, nil, args...)
		require.Equal(t, ExitUsage, code, args)
		require.True(t, strings.HasPrefix(errOut, "spice-orch: "), errOut)
	}
}

func TestRunsOnAStoreThatDoesNotExistYet(t *testing.T) {
	db := filepath.Join(t.TempDir(), "none", "runs.db")
	out, _, code := call(t, nil, "runs", "list", "--store", db)
	require.Equal(t, 0, code)
	require.Equal(t, "no pairs recorded yet (no store at "+db+")\n", out)
	_, errOut, code := call(t, nil, "runs", "show", "pair-x", "--store", db)
	require.Equal(t, ExitFailed, code)
	require.Equal(t, "spice-orch: pair-x: not found (nothing recorded yet)\n", errOut)
	_, _, code = call(t, nil, "runs", "replay", "pair-x", "--json", "--store", db)
	require.Equal(t, ExitFailed, code)
	require.NoDirExists(t, filepath.Dir(db), "looking does not create a store")
}

func TestStorePathPrecedence(t *testing.T) {
	vars := map[string]string{}
	get := func(k string) string { return vars[k] }
	vars["HOME"] = "/home/u"
	p, err := storePath("", get)
	require.NoError(t, err)
	require.Equal(t, "/home/u/.local/state/spice-orch/runs.db", p)
	vars["XDG_STATE_HOME"] = "relative/ignored"
	p, _ = storePath("", get)
	require.Equal(t, "/home/u/.local/state/spice-orch/runs.db", p, "XDG says relative paths are invalid")
	vars["XDG_STATE_HOME"] = "/state"
	p, _ = storePath("", get)
	require.Equal(t, "/state/spice-orch/runs.db", p)
	vars[EnvStore] = "/env.db"
	p, _ = storePath("", get)
	require.Equal(t, "/env.db", p)
	p, _ = storePath("/flag.db", get)
	require.Equal(t, "/flag.db", p)
}

func TestWorkspaceChoices(t *testing.T) {
	dir := t.TempDir()
	s := spec.Spec{File: filepath.Join(dir, "pair.yaml"), Workspace: "ws/inner"}
	got, temporary, cleanup, err := workspace("", s)
	require.NoError(t, err)
	cleanup()
	require.False(t, temporary)
	require.Equal(t, filepath.Join(dir, "ws", "inner"), got, "relative to the spec file")
	require.DirExists(t, got, "created, and kept")

	flag := filepath.Join(dir, "flag")
	got, _, _, err = workspace(flag, s)
	require.NoError(t, err)
	require.Equal(t, flag, got, "--workspace wins")

	got, temporary, cleanup, err = workspace("", spec.Spec{})
	require.NoError(t, err)
	require.True(t, temporary)
	require.DirExists(t, got)
	cleanup()
	require.NoDirExists(t, got, "a temporary workspace is removed")
}

func TestPauserHoldsOnceUntilReleasedOrTheLimit(t *testing.T) {
	_, err := newPauser("Not A Kind", nil, &bytes.Buffer{})
	require.Error(t, err)
	raw, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var notes bytes.Buffer
		p, err := newPauser("tool.completed", release, &notes)
		require.NoError(t, err)
		l, err := eventlog.New(eventlog.Config{MaxEvents: 16, MaxBytes: 1 << 20, Required: []eventlog.Observer{p}})
		require.NoError(t, err)
		appendKind := func(kind string) {
			_, err := l.Append(context.Background(), eventlog.Record{Kind: kind, Time: time.Unix(0, 0), Payload: raw})
			require.NoError(t, err)
		}
		appendKind("tool.started") // another kind passes at once
		done := make(chan struct{})
		go func() {
			defer close(done)
			appendKind("tool.completed")
		}()
		synctest.Wait()
		select {
		case <-done:
			t.Fatal("the pauser did not hold")
		default:
		}
		require.Equal(t, "spice-orch: SPICE_ORCH_PAUSE_AFTER: holding the pair after event 2 (tool.completed) until SIGINT or SIGTERM\n", notes.String())
		close(release)
		<-done
		appendKind("tool.completed") // only once
		require.Equal(t, 1, strings.Count(notes.String(), "holding"))

		// Without a signal, the hold ends after pauseLimit.
		never := make(chan struct{})
		p2, err := newPauser("tool.started", never, &bytes.Buffer{})
		require.NoError(t, err)
		start := time.Now()
		require.NoError(t, p2.Observe(context.Background(), eventlog.Event{}))
		require.NoError(t, p2.Observe(context.Background(), mustEvent(t, l)))
		require.Equal(t, pauseLimit, time.Since(start))
	})
}

// mustEvent appends a tool.started event to l and returns it.
func mustEvent(t *testing.T, l *eventlog.Log) eventlog.Event {
	t.Helper()
	raw, err := eventlog.NewRaw([]byte(`{}`))
	require.NoError(t, err)
	e, err := l.Append(context.Background(), eventlog.Record{Kind: "tool.started", Time: time.Unix(0, 0), Payload: raw})
	require.NoError(t, err)
	return e
}
