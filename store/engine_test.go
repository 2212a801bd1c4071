package store_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/store"
)

// requireDurabilityFailure checks what K26 promises the caller when the
// store cannot make the run's events durable: Wait returns a typed
// durability error whose outcome is the run's failure by a required
// observer, never a success.
func requireDurabilityFailure(t *testing.T, res engine.Result, err error) *engine.DurabilityError {
	t.Helper()
	var de *engine.DurabilityError
	require.ErrorAs(t, err, &de, "Wait must report that durability could not be established")
	var f *engine.Failure
	require.ErrorAs(t, de.Outcome, &f)
	require.Equal(t, engine.CodeObserverFailed, f.Problem.Code())
	var oe *eventlog.ObserverError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, 0, oe.Observer, "the store is the first required observer")
	require.Equal(t, engine.Failed, res.Status)
	return de
}

func textScript() [][]model.Item { return [][]model.Item{enginetest.Answer("done")} }

func TestK26_ClosedStoreFailsRunWithDurabilityError(t *testing.T) {
	st, err := store.Open(context.Background(), dbPath(t))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	eng := newEngine(t, &id.Counter{}, &enginetest.Clock{}, plans(t), textScript(), 0, st)
	_, res, err := runOnce(t, eng, "writer", "hi")
	de := requireDurabilityFailure(t, res, err)
	require.ErrorIs(t, de, store.ErrClosed)
}

func TestK26_ReadOnlyStoreFailsRunWithDurabilityError(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	w, err := store.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, w.Close())
	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()

	eng := newEngine(t, &id.Counter{}, &enginetest.Clock{}, plans(t), textScript(), 0, ro)
	_, res, err := runOnce(t, eng, "writer", "hi")
	de := requireDurabilityFailure(t, res, err)
	require.ErrorIs(t, de, store.ErrReadOnly)
}

// The database starts refusing writes in the middle of a run, while a
// mutating tool runs: the tool's terminal and the run's terminal cannot be
// made durable, the caller is told, and a later open finds the run
// interrupted with the call uncertain.
func TestK26_WritesFailingMidRunFailRunWithDurabilityError(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	broken := false
	tool := writeTool(t, func(ctx context.Context) {
		require.NoError(t, store.FailWrites(ctx, st))
		broken = true
	})
	eng := newEngine(t, &id.Counter{}, &enginetest.Clock{}, plans(t, tool), [][]model.Item{
		{enginetest.Call("call-1", "write", `{}`), enginetest.Done(1, 1)},
		enginetest.Answer("done"),
	}, 0, st)
	r, res, err := runOnce(t, eng, "writer", "write")
	require.True(t, broken)
	de := requireDurabilityFailure(t, res, err)
	require.ErrorContains(t, de.Err, "readonly")

	// Nothing after tool.started reached the file; the run never got a
	// recorded terminal.
	require.NoError(t, st.Close())
	st2 := open(t, path)
	rec := st2.Recovery()
	require.Equal(t, []string{string(r.ID())}, rec.Runs)
	require.Len(t, rec.Uncertain, 1)
	run, err := st2.Run(ctx, string(r.ID()))
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, run.Summary.Status)
	require.Equal(t, "tool.started", run.Events[len(run.Events)-1].Event.Kind())
	require.Len(t, run.Uncertain, 1)
	require.Equal(t, store.CallUncertain, run.Uncertain[0].Status)
}

// Another process holds the database's write lock: the store cannot commit
// within the engine's finalization bound, so the run fails with a
// durability error instead of waiting forever or losing events silently.
func TestK26_TimedOutWriteFailsRunWithDurabilityError(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.OpenConfig(ctx, store.Config{Path: path, BusyTimeout: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, st.Close()) })

	other, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer other.Close()
	lock, err := other.Conn(ctx)
	require.NoError(t, err)
	_, err = lock.ExecContext(ctx, "BEGIN IMMEDIATE")
	require.NoError(t, err)

	eng := newEngine(t, &id.Counter{}, &enginetest.Clock{}, plans(t), textScript(), 100*time.Millisecond, st)
	r, res, err := runOnce(t, eng, "writer", "hi")
	de := requireDurabilityFailure(t, res, err)
	require.True(t, errors.Is(de, context.DeadlineExceeded), "the store gave up with the engine's bound: %v", de)

	// Once the lock is gone the store catches up with what it was handed;
	// those events were never acknowledged, and the run's record shows the
	// failure it reported.
	_, err = lock.ExecContext(ctx, "ROLLBACK")
	require.NoError(t, err)
	require.NoError(t, lock.Close())
	require.NoError(t, st.Close())
	st2 := open(t, path)
	run, err := st2.Run(ctx, string(r.ID()))
	require.NoError(t, err)
	require.Equal(t, store.StatusFailed, run.Summary.Status)
	require.Equal(t, engine.CodeObserverFailed, run.Summary.ProblemCode)
}
