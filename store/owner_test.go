package store_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// ownerEnv, when set to a database path, makes the test binary a process
// that records a pair up to a started mutating call and then holds the
// store open until its stdin closes (or a minute passes).
const ownerEnv = "SPICE_STORE_OWNER_WRITER"

const (
	ownerPair = "pair-owned"
	ownerRun  = "pair-owned/writer/run-1"
)

func ownerWriter(path string) int {
	ctx := context.Background()
	st, err := store.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "owner writer:", err)
		return 2
	}
	if err := recordOwnedPair(ctx, st); err != nil {
		fmt.Fprintln(os.Stderr, "owner writer:", err)
		return 2
	}
	fmt.Println("ready")
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
	}
	return 0 // exits without closing the store, as a crash would
}

// recordOwnedPair records a pair whose writer run has started a mutating
// call, and nothing after it.
func recordOwnedPair(ctx context.Context, st *store.Store) error {
	pair, err := eventlog.New(eventlog.Config{Name: ownerPair, MaxEvents: 64, MaxBytes: 1 << 20, Required: []eventlog.Observer{st}})
	if err != nil {
		return err
	}
	run, err := eventlog.New(eventlog.Config{Name: ownerRun, MaxEvents: 64, MaxBytes: 1 << 20,
		Required: []eventlog.Observer{relay{pair: pair, worker: "writer"}, st}})
	if err != nil {
		return err
	}
	started, err := eventlog.NewRaw([]byte(`{"pair_id":"` + ownerPair + `","plan_id":"plan-1","workers":{"first":"writer","second":"reviewer"}}`))
	if err != nil {
		return err
	}
	if _, err := pair.Append(ctx, eventlog.Record{Kind: "pair.started", Time: t0, Payload: started}); err != nil {
		return err
	}
	for i, p := range []event.Payload{
		event.RunStarted{RunID: ownerRun, PlanID: "plan-1", PlanFingerprint: "ab"},
		event.TurnStarted{RunID: ownerRun, TurnID: "turn-1", Index: 1},
		event.ModelCompleted{OperationID: "op-model", InputTokens: 10, OutputTokens: 2, ToolCalls: 1},
		event.ToolStarted{TurnID: "turn-1", OperationID: "op-write", CallID: "c1", Name: "write", Effect: "mutating", Replay: "unsafe"},
	} {
		if _, err := run.Append(ctx, event.Record(t0.Add(time.Duration(i+1)*time.Millisecond), p)); err != nil {
			return err
		}
	}
	return nil
}

// requireLive checks that st shows the owned pair as still being recorded.
func requireLive(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	pair, err := st.Pair(ctx, ownerPair)
	require.NoError(t, err)
	require.Equal(t, store.StatusRunning, pair.Summary.Status)
	require.Empty(t, pair.Uncertain, "a call its owner is still running is not uncertain")
	require.Len(t, pair.Runs, 1)
	require.Equal(t, store.StatusRunning, pair.Runs[0].Status)
	run, err := st.Run(ctx, ownerRun)
	require.NoError(t, err)
	require.Equal(t, []store.CallStatus{store.CallStarted}, []store.CallStatus{run.Calls[0].Status})
	running, err := st.ListPairs(ctx, store.ListOptions{Status: store.StatusRunning})
	require.NoError(t, err)
	require.Len(t, running, 1)
}

// requireInterrupted checks that st shows the owned pair as interrupted,
// its mutating call uncertain, and what the run recorded.
func requireInterrupted(t *testing.T, st *store.Store) {
	t.Helper()
	ctx := context.Background()
	pair, err := st.Pair(ctx, ownerPair)
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, pair.Summary.Status)
	require.Len(t, pair.Uncertain, 1)
	require.Equal(t, store.CallUncertain, pair.Uncertain[0].Status)
	require.Len(t, pair.Runs, 1)
	r := pair.Runs[0]
	require.Equal(t, store.StatusInterrupted, r.Status)
	require.Equal(t, []any{1, int64(10), int64(2)}, []any{r.Turns, r.InputTokens, r.OutputTokens},
		"an interrupted run counts what it recorded")
	interrupted, err := st.ListPairs(ctx, store.ListOptions{Status: store.StatusInterrupted})
	require.NoError(t, err)
	require.Len(t, interrupted, 1)
}

// Two real processes, because recovery must tell a live owner from a dead
// one: while one records a pair, another process's writable and read-only
// opens leave it running; once the first
// is killed, the pair is interrupted and its mutating call uncertain, and
// the next writable open marks them.
func TestRecoveryLeavesAPairOfALiveOwnerRunning(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a writer process")
	}
	ctx := context.Background()
	path := dbPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), ownerEnv+"="+path)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = os.Stderr // the child's complaints, if any, in the test's output
	require.NoError(t, cmd.Start())
	waited := false
	t.Cleanup(func() {
		stdin.Close()
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)

	other, err := store.Open(ctx, path)
	require.NoError(t, err)
	require.True(t, other.Recovery().IsZero(), "nothing of a live owner is recovered")
	requireLive(t, other)
	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	requireLive(t, ro)

	require.NoError(t, cmd.Process.Kill()) // SIGKILL: the kernel releases its lock
	require.Error(t, cmd.Wait())
	waited = true
	requireInterrupted(t, other)
	requireInterrupted(t, ro)
	require.NoError(t, ro.Close())
	require.NoError(t, other.Close())

	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	rec := st.Recovery()
	require.Equal(t, []string{ownerPair}, rec.Pairs)
	require.Equal(t, []string{ownerRun}, rec.Runs)
	require.Len(t, rec.Uncertain, 1)
	requireInterrupted(t, st)
	require.NoError(t, st.Close())
	locks, err := os.ReadDir(path + "-owners")
	require.NoError(t, err)
	require.Empty(t, locks, "the gone owner's lock file is removed, and a closed open leaves none")
}

// Within one process too, each open is its own owner: a second open
// leaves the first one's pair running; closing the first without a
// terminal leaves it to recovery.
func TestEachOpenIsAnOwner(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	first, err := store.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, recordOwnedPair(ctx, first))
	requireLive(t, first)
	second := open(t, path)
	require.True(t, second.Recovery().IsZero())
	requireLive(t, second)
	require.NoError(t, first.Close())
	requireInterrupted(t, second)
	third := open(t, path)
	require.Equal(t, []string{ownerPair}, third.Recovery().Pairs)
	_, err = os.Stat(filepath.Join(path + "-owners"))
	require.NoError(t, err)
}
