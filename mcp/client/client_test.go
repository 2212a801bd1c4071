package client

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/proctree"
)

func TestM1_PinnedStdioServerServesItsTools(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	require.True(t, s.Pinned())
	res, err := exec1(t, context.Background(), s, "echo", map[string]string{"text": "hello"})
	require.NoError(t, err)
	require.Equal(t, "hello", res.Content())
}

func TestM1_NothingOfTheHostEnvironmentPasses(t *testing.T) {
	t.Setenv("MCPTEST_HOST_SECRET", "s3cret")
	s := connect(t, fixtureConfig(t, "ALLOWED=1"))
	res, err := exec1(t, context.Background(), s, "env", map[string]string{})
	require.NoError(t, err)
	require.Equal(t, "ALLOWED,"+envServe, res.Content())
}

func TestM1_RelativePathRefused(t *testing.T) {
	cfg := fixtureConfig(t)
	cfg.Path = "client.test"
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrRelativePath)
	_, err = Digest("client.test")
	require.ErrorIs(t, err, ErrRelativePath)
}

func TestM1_WrongDigestRefused(t *testing.T) {
	cfg := fixtureConfig(t)
	cfg.SHA256 = strings.Repeat("0", 64)
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrDigest)
}

// interpreted builds an interpreted server: the test binary stands in for
// the interpreter, with an entry file and a lock file pinned beside it.
func interpreted(t *testing.T) (Config, string, string) {
	cfg := fixtureConfig(t)
	dir := t.TempDir()
	entry, lock := filepath.Join(dir, "index.js"), filepath.Join(dir, "package-lock.json")
	require.NoError(t, os.WriteFile(entry, []byte("// entry\n"), 0o600))
	require.NoError(t, os.WriteFile(lock, []byte(`{"lockfileVersion":3}`), 0o600))
	ed, err := Digest(entry)
	require.NoError(t, err)
	ld, err := Digest(lock)
	require.NoError(t, err)
	cfg.Entry = &FilePin{Path: entry, SHA256: ed}
	cfg.Lock = &FilePin{Path: lock, SHA256: ld}
	return cfg, entry, lock
}

func TestM1_InterpretedServerPinsInterpreterEntryAndLock(t *testing.T) {
	cfg, _, _ := interpreted(t)
	s := connect(t, cfg)
	_, err := exec1(t, context.Background(), s, "echo", map[string]string{"text": "x"})
	require.NoError(t, err)
}

func TestM1_InterpreterDriftRefused(t *testing.T) {
	cfg, _, _ := interpreted(t)
	cfg.SHA256 = strings.Repeat("a", 64)
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrDigest)
	require.Contains(t, err.Error(), "path ")
}

func TestM1_EntryDriftRefused(t *testing.T) {
	cfg, entry, _ := interpreted(t)
	require.NoError(t, os.WriteFile(entry, []byte("// entry, changed\n"), 0o600))
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrDigest)
	require.Contains(t, err.Error(), "entry ")
}

func TestM1_LockFileDriftRefused(t *testing.T) {
	cfg, _, lock := interpreted(t)
	require.NoError(t, os.WriteFile(lock, []byte(`{"lockfileVersion":3,"x":1}`), 0o600))
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrDigest)
	require.Contains(t, err.Error(), "lock ")
}

func TestM1_HTTPURLMustBeLoopbackOrHTTPS(t *testing.T) {
	for _, u := range []string{"http://example.com/mcp", "ftp://127.0.0.1/", "http://user:pw@127.0.0.1/mcp"} {
		_, err := Connect(context.Background(), Config{Name: "remote", URL: u})
		require.ErrorIs(t, err, ErrURL, u)
	}
}

func TestM2_PinnedDefinitionDigestRefusesAChangedDescription(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	var digest string
	for _, in := range s.Info() {
		if in.Name == "echo" {
			digest = in.Digest
		}
	}
	require.Len(t, digest, 64)
	cfg := fixtureConfig(t, envVariant+"=changed")
	cfg.Tools = map[string]ToolConfig{"echo": {Digest: digest}}
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrDefinitionChanged)

	cfg = fixtureConfig(t)
	cfg.Tools = map[string]ToolConfig{"echo": {Digest: digest}}
	connect(t, cfg)
}

func TestM3_EffectFromDeclarationElseAnnotationsOfAPinnedServer(t *testing.T) {
	cfg := fixtureConfig(t)
	cfg.Tools = map[string]ToolConfig{"write": {Effect: tool.Mutating, Replay: tool.Idempotent}}
	s := connect(t, cfg)
	got := map[string]Info{}
	for _, in := range s.Info() {
		got[in.Name] = in
	}
	check := func(name string, e tool.Effect, r tool.Replay, from From) {
		t.Helper()
		require.Equal(t, e, got[name].Effect, name)
		require.Equal(t, r, got[name].Replay, name)
		require.Equal(t, from, got[name].From, name)
		d := toolNamed(t, s, name).Definition()
		require.Equal(t, e, d.Effect(), name)
		require.Equal(t, r, d.Replay(), name)
	}
	check("write", tool.Mutating, tool.Idempotent, FromDeclared)
	check("echo", tool.ReadOnly, tool.Safe, FromAnnotations)
	check("put", tool.Mutating, tool.Idempotent, FromAnnotations)
	check("crash", tool.Mutating, tool.Unsafe, FromDefault)
}

func TestM3_UnpinnedServerAnnotationsAreNotTrusted(t *testing.T) {
	for _, a := range []bool{true, false} {
		e, r, from := effectOf(false, ToolConfig{}, nil)
		require.Equal(t, tool.Mutating, e)
		require.Equal(t, tool.Unsafe, r)
		require.Equal(t, FromDefault, from)
		_ = a
	}
	e, r, from := effectOf(false, ToolConfig{}, readOnlyHint())
	require.Equal(t, tool.Mutating, e)
	require.Equal(t, tool.Unsafe, r)
	require.Equal(t, FromDefault, from)
	e, r, from = effectOf(false, ToolConfig{Effect: tool.ReadOnly, Replay: tool.Safe}, nil)
	require.Equal(t, tool.ReadOnly, e)
	require.Equal(t, tool.Safe, r)
	require.Equal(t, FromDeclared, from)
}

func TestM4_IsErrorIsAModelVisibleProblem(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	res, err := exec1(t, context.Background(), s, "fail", map[string]string{"text": "x"})
	require.NoError(t, err)
	p, ok := res.Problem()
	require.True(t, ok)
	require.Equal(t, CodeToolError, p.Code())
	require.Contains(t, res.Content(), "no such thing: x")
}

func TestM4_CancellationMidCallSendsCancelledAndEndsOnce(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	fifo := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	ctx, cancel := context.WithCancel(context.Background())
	type outcome struct {
		res tool.Result
		err error
	}
	done := make(chan outcome, 2)
	go func() {
		res, err := exec1(t, ctx, s, "block", map[string]string{"path": fifo})
		done <- outcome{res, err}
	}()
	f, err := os.Open(fifo)
	require.NoError(t, err)
	defer f.Close()
	r := bufio.NewReader(f)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "started\n", line)
	cancel()
	// The server's handler sees the cancellation only through
	// notifications/cancelled.
	line, err = r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "cancelled\n", line)
	o := <-done
	var ee *tool.ExecutionError
	require.ErrorAs(t, o.err, &ee)
	require.Equal(t, tool.Uncertain, ee.Outcome(), "block is mutating: it may have taken effect")
	require.Equal(t, tool.NoRetry, ee.Retry())
	require.ErrorIs(t, o.err, context.Canceled)
	require.Empty(t, done)
}

func TestM4_CrashMidCallOfAMutatingToolIsUncertainAndNotRerun(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	runs := filepath.Join(t.TempDir(), "runs")
	d, err := tool.NewDispatcher(tool.DispatcherConfig{Tools: s.Tools()})
	require.NoError(t, err)
	_, err = d.Dispatch(context.Background(), newCall(t, "crash", map[string]string{"path": runs}), nil)
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Uncertain, ee.Outcome())
	require.Equal(t, tool.NoRetry, ee.Retry())
	require.Equal(t, CodeFailed, ee.Problem().Code())
	b, err := os.ReadFile(runs)
	require.NoError(t, err)
	require.Equal(t, "ran\n", string(b), "the call ran once and was not re-run")
	// After the crash nothing is sent: definitive.
	<-s.exited
	_, err = exec1(t, context.Background(), s, "write", map[string]string{"path": runs, "text": "again"})
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Definitive, ee.Outcome())
	require.Equal(t, CodeUnavailable, ee.Problem().Code())
}

func TestM4_ServerExitMidCallFailsAtOnceThoughAGrandchildHoldsItsOutput(t *testing.T) {
	t.Run("pid namespace when allowed", func(t *testing.T) { exitFailsAtOnce(t, false) })
	t.Run("process group only", func(t *testing.T) {
		was := proctree.SetNamespaces(false)
		defer proctree.SetNamespaces(was)
		exitFailsAtOnce(t, true)
	})
}

// exitFailsAtOnce calls orphan, whose server leaves a grandchild holding
// its stdout and exits: the call must end as a crash long before its
// bound, and Close must end the grandchild. In a PID namespace the kernel
// kills the grandchild with the server and the SDK may see the end of
// stdout first; in a process group only the watch of the exit ends the
// call, which held says.
func exitFailsAtOnce(t *testing.T, held bool) {
	cfg := fixtureConfig(t)
	cfg.CallTimeout = 60 * time.Second
	s, err := Connect(context.Background(), cfg)
	require.NoError(t, err)
	defer s.Close()
	dir := t.TempDir()
	started, exit := filepath.Join(dir, "started"), filepath.Join(dir, "exit")
	require.NoError(t, syscall.Mkfifo(started, 0o600))
	require.NoError(t, syscall.Mkfifo(exit, 0o600))
	done := make(chan error, 1)
	go func() {
		_, err := exec1(t, context.Background(), s, "orphan", map[string]string{"path": started, "text": exit})
		done <- err
	}()
	f, err := os.Open(started)
	require.NoError(t, err)
	line, err := bufio.NewReader(f).ReadString('\n')
	f.Close()
	require.NoError(t, err)
	require.Equal(t, "started\n", line)
	// The grandchild is a descendant while the server runs; the PIDs are
	// of this namespace, whatever namespace the server has.
	grandchildren := proctree.Descendants(s.PID())
	require.NotEmpty(t, grandchildren)
	g, err := os.OpenFile(exit, os.O_WRONLY, 0)
	require.NoError(t, err)
	g.Close()
	bound := time.NewTimer(10 * time.Second)
	defer bound.Stop()
	select {
	case err = <-done:
	case <-bound.C:
		t.Fatal("the call outlived its server by 10s")
	}
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, CodeFailed, ee.Problem().Code(), "the server ended; the call did not time out")
	if held {
		require.ErrorIs(t, err, errExited)
	}
	require.Equal(t, tool.Uncertain, ee.Outcome(), "orphan is mutating: it may have taken effect")
	require.Equal(t, tool.NoRetry, ee.Retry())
	require.NoError(t, s.Close())
	require.Empty(t, proctree.Live(grandchildren), "the grandchild is gone")
}

func TestM4_ResultOverTheBoundFails(t *testing.T) {
	cfg := fixtureConfig(t)
	cfg.MaxResultBytes = 100
	s := connect(t, cfg)
	_, err := exec1(t, context.Background(), s, "big", map[string]int{"size": 101})
	var ee *tool.ExecutionError
	require.ErrorAs(t, err, &ee)
	require.Equal(t, tool.Definitive, ee.Outcome(), "big is read-only")
	require.Equal(t, CodeResultTooLarge, ee.Problem().Code())
	res, err := exec1(t, context.Background(), s, "big", map[string]int{"size": 100})
	require.NoError(t, err)
	require.Len(t, res.Content(), 100)
}

func TestM5_TooManyToolsRefused(t *testing.T) {
	cfg := fixtureConfig(t)
	cfg.MaxTools = 3
	_, err := Connect(context.Background(), cfg)
	require.ErrorIs(t, err, ErrTooManyTools)
}

func TestM5_CloseEndsTheWholeTreeEvenAGrandchildInItsOwnSession(t *testing.T) {
	t.Run("pid namespace when allowed", closeEndsTheTree)
	t.Run("process group only", func(t *testing.T) {
		was := proctree.SetNamespaces(false)
		defer proctree.SetNamespaces(was)
		closeEndsTheTree(t)
	})
}

func closeEndsTheTree(t *testing.T) {
	s, err := Connect(context.Background(), fixtureConfig(t))
	require.NoError(t, err)
	_, err = exec1(t, context.Background(), s, "spawn", map[string]string{})
	require.NoError(t, err)
	// The PID the server names may be one of its own PID namespace: find
	// the grandchild from here, as the descendant in another session.
	leader, ok := proctree.Of(s.PID())
	require.True(t, ok)
	var escaped []proctree.Proc
	for _, d := range proctree.Descendants(s.PID()) {
		if proctree.Session(d) != proctree.Session(leader) {
			escaped = append(escaped, d)
		}
	}
	require.Len(t, escaped, 1, "the grandchild runs in a session of its own")
	require.NoError(t, s.Close())
	require.False(t, proctree.Alive(leader), "the server is gone")
	require.Empty(t, proctree.Live(escaped), "the grandchild in its own session is gone")
}

func running(pid int) bool {
	_, ok := proctree.Of(pid)
	return ok
}

var _ = errors.New

func TestR5_IdempotencyKeyReachesTheServerInMeta(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	k := idempotency.Derive("pair-1", "pair-1/writer/run-1", "call-1")
	res, err := exec1(t, idempotency.WithKey(context.Background(), k), s, "key", map[string]string{})
	require.NoError(t, err)
	require.Equal(t, k.String(), res.Content())
	res, err = exec1(t, context.Background(), s, "key", map[string]string{})
	require.NoError(t, err)
	require.Empty(t, res.Content())
}

func TestM2_ListChangedMakesACandidateThatLeavesTheVerifiedToolsAlone(t *testing.T) {
	s := connect(t, fixtureConfig(t))
	before := names(s.Tools())
	_, err := exec1(t, context.Background(), s, "grow", map[string]string{})
	require.NoError(t, err)
	<-s.ListChanged()
	tools, _, err := s.Relist(context.Background())
	require.NoError(t, err)
	require.Contains(t, names(tools), "extra", "the candidate has the new tool")
	require.Equal(t, before, names(s.Tools()), "the verified tools stay")
}

func TestM2_ListChangedWithAChangedPinnedDescriptionIsRefused(t *testing.T) {
	probe := connect(t, fixtureConfig(t))
	var digest string
	for _, in := range probe.Info() {
		if in.Name == "echo" {
			digest = in.Digest
		}
	}
	cfg := fixtureConfig(t)
	cfg.Tools = map[string]ToolConfig{"echo": {Digest: digest}}
	s := connect(t, cfg)
	_, err := exec1(t, context.Background(), s, "rug", map[string]string{})
	require.NoError(t, err)
	<-s.ListChanged()
	_, _, err = s.Relist(context.Background())
	require.ErrorIs(t, err, ErrDefinitionChanged)
	// The verified echo still serves under its reviewed definition.
	require.Equal(t, "Echoes its text.", toolNamed(t, s, "echo").Definition().Description())
}

func names(ts []tool.Tool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Definition().Name())
	}
	return out
}
