package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

func TestK16_PairReplaysByteIdenticalToLiveJSON(t *testing.T) {
	st := open(t, dbPath(t))
	p := runPair(t, st, "pair-1")

	for _, log := range append([]string{p.pairID}, p.runs...) {
		want := p.live.lines(log)
		require.NotEmpty(t, want, log)
		require.Equal(t, string(want), string(replay(t, st, log)), "replay of %s", log)
	}

	rec, err := st.Pair(context.Background(), p.pairID)
	require.NoError(t, err)
	require.Equal(t, store.StatusCompleted, rec.Summary.Status)
	require.Equal(t, "approved", rec.Summary.Reason)
	require.Equal(t, "plan-1", rec.Summary.PlanID)
	require.Equal(t, []string{"writer", "reviewer"}, rec.Summary.Workers)
	require.False(t, rec.Summary.Started.IsZero())
	require.Positive(t, rec.Summary.Duration())
	require.Len(t, rec.Runs, 2)
	require.Equal(t, p.runs[0], rec.Runs[0].ID)
	require.Equal(t, "writer", rec.Runs[0].Worker)
	require.Equal(t, p.pairID, rec.Runs[0].PairID)
	require.Equal(t, "reviewer", rec.Runs[1].Worker)
	for _, r := range rec.Runs {
		require.Equal(t, store.StatusCompleted, r.Status)
		require.Equal(t, "plan-1", r.PlanID)
	}
	require.Empty(t, rec.Uncertain)

	// The timeline reads back in order, relayed events naming their run.
	var lines []string
	for i, en := range rec.Events {
		require.Equal(t, uint64(i+1), en.Event.Seq())
		require.Equal(t, p.pairID, en.Log)
		lines = append(lines, en.Summary())
	}
	require.Equal(t, "pair.started", rec.Events[0].Event.Kind())
	require.True(t, rec.Events[1].Relayed)
	require.Equal(t, "writer", rec.Events[1].Worker)
	require.Equal(t, p.runs[0], rec.Events[1].RunID)
	require.Equal(t, uint64(1), rec.Events[1].RunSeq)
	require.IsType(t, event.RunStarted{}, rec.Events[1].Payload)
	last := rec.Events[len(rec.Events)-1]
	require.Equal(t, "pair.completed", last.Event.Kind())
	require.Equal(t, "approved", last.Reason)
	timeline := strings.Join(lines, "\n")
	t.Log("timeline:\n" + timeline)
	require.Contains(t, timeline, "[writer "+p.runs[0]+"#")
	require.Contains(t, timeline, "tool.started write effect=mutating replay=unsafe call=call-1")
	require.Contains(t, timeline, `pair.completed reason="approved"`)

	run, err := st.Run(context.Background(), p.runs[0])
	require.NoError(t, err)
	require.Equal(t, "writer", run.Summary.Worker)
	require.Equal(t, 2, run.Summary.Turns)
	require.Len(t, run.Calls, 1)
	require.Equal(t, store.CallCompleted, run.Calls[0].Status)
	require.Equal(t, "mutating", run.Calls[0].Effect)
	require.Empty(t, run.Uncertain)
	for i, en := range run.Events {
		require.Equal(t, uint64(i+1), en.Event.Seq())
		require.False(t, en.Relayed)
		require.NotNil(t, en.Payload, en.Event.Kind())
	}
}

func TestK16_ReplayOfUnknownLogIsNotFound(t *testing.T) {
	st := open(t, dbPath(t))
	var b strings.Builder
	require.ErrorIs(t, st.ReplayJSON(context.Background(), &b, "nope"), store.ErrNotFound)
	_, err := st.Pair(context.Background(), "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
	_, err = st.Run(context.Background(), "nope")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestK17_DurabilityIsWALWithFullSync(t *testing.T) {
	path := dbPath(t)
	st := open(t, path)
	d, err := st.Durability(context.Background())
	require.NoError(t, err)
	require.Equal(t, store.Durability{JournalMode: "wal", Synchronous: "FULL"}, d)

	// The journal mode is a property of the file: another connection sees it.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var mode string
	require.NoError(t, db.QueryRow("PRAGMA journal_mode").Scan(&mode))
	require.Equal(t, "wal", mode)
}

func TestK16_SameEventTwiceIsHarmless(t *testing.T) {
	st := open(t, dbPath(t))
	rec := &eventRecorder{}
	l := newLog(t, "run-x", st, rec)
	_, err := l.Append(context.Background(), event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "plan-1", PlanFingerprint: "ab"}))
	require.NoError(t, err)
	e := rec.events[0]
	require.NoError(t, st.Observe(context.Background(), e))
	require.NoError(t, st.Observe(context.Background(), e))
	require.Equal(t, string(e.AppendJSON(nil))+"\n", string(replay(t, st, "run-x")))
}

func TestK16_DifferentBytesForUsedSequenceIsIntegrityError(t *testing.T) {
	st := open(t, dbPath(t))
	a := newLog(t, "run-x", st)
	_, err := a.Append(context.Background(), event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "plan-1", PlanFingerprint: "ab"}))
	require.NoError(t, err)

	// Another log with the same name reuses sequence 1 with other bytes.
	b := newLog(t, "run-x", st)
	_, err = b.Append(context.Background(), event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "plan-2", PlanFingerprint: "ab"}))
	var ie *store.IntegrityError
	require.ErrorAs(t, err, &ie)
	require.Equal(t, "run-x", ie.Log)
	require.Equal(t, uint64(1), ie.Seq)
	require.NotContains(t, ie.Error(), "plan-2", "the error never quotes the bytes")

	// The recorded event is unchanged.
	out := replay(t, st, "run-x")
	require.Contains(t, string(out), `"plan_id":"plan-1"`)
	require.NotContains(t, string(out), "plan-2")
}

func TestK16_ObserveRejectsEventsItCannotKey(t *testing.T) {
	st := open(t, dbPath(t))
	err := st.Observe(context.Background(), eventlog.Event{})
	require.ErrorIs(t, err, bound.ErrInvalid)

	rec := &eventRecorder{}
	unnamed := newLog(t, "", rec)
	_, err = unnamed.Append(context.Background(), event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "p", PlanFingerprint: "ab"}))
	require.NoError(t, err)
	var be *bound.Error
	require.ErrorAs(t, st.Observe(context.Background(), rec.events[0]), &be)
	require.Equal(t, "event.log", be.Field)
}

func TestK26_ObserveHonoursContext(t *testing.T) {
	st := open(t, dbPath(t))
	rec := &eventRecorder{}
	l := newLog(t, "run-x", rec)
	_, err := l.Append(context.Background(), event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "p", PlanFingerprint: "ab"}))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, st.Observe(ctx, rec.events[0]), context.Canceled)
	var b strings.Builder
	require.ErrorIs(t, st.ReplayJSON(context.Background(), &b, "run-x"), store.ErrNotFound, "a refused event is not recorded")
}

func TestK16_ClosedStoreRefusesEvents(t *testing.T) {
	st, err := store.Open(context.Background(), dbPath(t))
	require.NoError(t, err)
	require.NoError(t, st.Close())
	require.NoError(t, st.Close(), "Close is idempotent")
	rec := &eventRecorder{}
	l := newLog(t, "run-x", rec)
	_, err = l.Append(context.Background(), event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "p", PlanFingerprint: "ab"}))
	require.NoError(t, err)
	require.ErrorIs(t, st.Observe(context.Background(), rec.events[0]), store.ErrClosed)
	_, err = st.ListPairs(context.Background(), store.ListOptions{})
	require.ErrorIs(t, err, store.ErrClosed)
}

func TestSchemaVersionMismatchIsTypedError(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st, err := store.Open(ctx, path)
	require.NoError(t, err)
	require.NoError(t, st.Close())

	setVersion := func(v int) {
		db, err := sql.Open("sqlite", path)
		require.NoError(t, err)
		defer db.Close()
		_, err = db.Exec(fmt.Sprintf("PRAGMA user_version = %d", v))
		require.NoError(t, err)
	}

	setVersion(store.SchemaVersion + 98)
	_, err = store.Open(ctx, path)
	var ve *store.VersionError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, store.SchemaVersion+98, ve.Found)
	require.Equal(t, store.SchemaVersion, ve.Supported)
	require.Contains(t, err.Error(), "newer")
	_, err = store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.ErrorAs(t, err, &ve)

	// An older schema cannot be migrated by a read-only open.
	setVersion(1)
	_, err = store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.ErrorAs(t, err, &ve)
	require.Equal(t, 1, ve.Found)

	setVersion(store.SchemaVersion)
	st, err = store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	require.NoError(t, st.Close())
}

func TestOpenRefusesForeignDatabase(t *testing.T) {
	path := dbPath(t)
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	_, err = db.Exec("CREATE TABLE notes (body TEXT)")
	require.NoError(t, err)
	require.NoError(t, db.Close())
	_, err = store.Open(context.Background(), path)
	require.ErrorIs(t, err, store.ErrNotStore)

	// A read-only open of a missing file neither creates it nor succeeds.
	missing := dbPath(t)
	_, err = store.OpenConfig(context.Background(), store.Config{Path: missing, ReadOnly: true})
	require.Error(t, err)
	_, statErr := os.Stat(missing)
	require.ErrorIs(t, statErr, os.ErrNotExist)
}

func TestOpenValidatesConfig(t *testing.T) {
	_, err := store.OpenConfig(context.Background(), store.Config{})
	require.ErrorIs(t, err, bound.ErrInvalid)
	_, err = store.OpenConfig(context.Background(), store.Config{Path: dbPath(t), BusyTimeout: -1})
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func TestOpenPathWithURICharacters(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/odd ?name#1%.db"
	st := open(t, path)
	p := runPair(t, st, "pair-odd")
	require.Equal(t, string(p.live.lines(p.pairID)), string(replay(t, st, p.pairID)))
	_, err := os.Stat(path)
	require.NoError(t, err, "the file is at the path given, not at a URI reading of it")
}

func TestK17_ConcurrentPairsShareOneStore(t *testing.T) {
	st := open(t, dbPath(t))
	const pairs = 6
	results := make([]pairResult, pairs)
	t.Run("pairs", func(t *testing.T) {
		for i := range pairs {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				results[i] = runPair(t, st, fmt.Sprintf("pair-%d", i))
			})
		}
	})
	for _, p := range results {
		for _, log := range append([]string{p.pairID}, p.runs...) {
			require.Equal(t, string(p.live.lines(log)), string(replay(t, st, log)), log)
		}
	}
	list, err := st.ListPairs(context.Background(), store.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list, pairs)
	for _, p := range list {
		require.Equal(t, store.StatusCompleted, p.Status)
		require.Equal(t, []string{"writer", "reviewer"}, p.Workers)
	}
	runs, err := st.ListRuns(context.Background(), store.ListOptions{Status: store.StatusCompleted})
	require.NoError(t, err)
	require.Len(t, runs, 2*pairs)
}

func TestListOptionsAreBounded(t *testing.T) {
	st := open(t, dbPath(t))
	runPair(t, st, "pair-a")
	runPair(t, st, "pair-b")
	list, err := st.ListPairs(context.Background(), store.ListOptions{Limit: 1})
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, err = st.ListPairs(context.Background(), store.ListOptions{Status: store.StatusFailed})
	require.NoError(t, err)
	require.Empty(t, list)
	_, err = st.ListPairs(context.Background(), store.ListOptions{Limit: store.MaxListLimit + 1})
	require.ErrorIs(t, err, bound.ErrExceeded)
	_, err = st.ListRuns(context.Background(), store.ListOptions{Limit: -1})
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func TestReadOnlyOpenReadsButNeverRecords(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	w, err := store.Open(ctx, path)
	require.NoError(t, err)
	p := runPair(t, w, "pair-1")
	require.NoError(t, w.Close())

	ro, err := store.OpenConfig(ctx, store.Config{Path: path, ReadOnly: true})
	require.NoError(t, err)
	defer ro.Close()
	require.Equal(t, string(p.live.lines(p.pairID)), string(replay(t, ro, p.pairID)))
	_, err = ro.Durability(ctx)
	require.ErrorIs(t, err, store.ErrReadOnly)
	require.True(t, ro.Recovery().IsZero())
}

// eventRecorder keeps events in order; one log appends at a time.
type eventRecorder struct {
	mu     sync.Mutex
	events []eventlog.Event
}

func (r *eventRecorder) Observe(_ context.Context, e eventlog.Event) error {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	return nil
}

// A row changed behind the store's back is refused by every read, named by
// log and sequence; the schema itself refuses rows over the event bound.
func TestStoredRowsAreCheckedOnRead(t *testing.T) {
	ctx := context.Background()
	path := dbPath(t)
	st := open(t, path)
	l := newLog(t, "run-x", st)
	_, err := l.Append(ctx, event.Record(t0, event.RunStarted{RunID: "run-x", PlanID: "plan-1", PlanFingerprint: "ab"}))
	require.NoError(t, err)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.Exec(`INSERT INTO events (log, seq, kind, time, body) VALUES ('run-y', 1, 'run.started', 'x', ?)`,
		make([]byte, eventlog.MaxEventBytes+1))
	require.ErrorContains(t, err, "CHECK constraint failed")
	_, err = db.Exec(`UPDATE events SET kind = 'run.failed' WHERE log = 'run-x' AND seq = 1`)
	require.NoError(t, err)

	var b strings.Builder
	var ie *store.IntegrityError
	require.ErrorAs(t, st.ReplayJSON(ctx, &b, "run-x"), &ie)
	require.Equal(t, "run-x", ie.Log)
	require.Equal(t, uint64(1), ie.Seq)
	require.Empty(t, b.String(), "nothing is written before the check")
	_, err = st.Run(ctx, "run-x")
	require.ErrorAs(t, err, &ie)

	_, err = db.Exec(`UPDATE events SET kind = 'run.started', body = '{"seq":1' WHERE log = 'run-x' AND seq = 1`)
	require.NoError(t, err)
	require.ErrorAs(t, st.ReplayJSON(ctx, &b, "run-x"), &ie)
	require.ErrorIs(t, ie, bound.ErrInvalid, "the decoding error is kept")
}

// panicky is a payload whose encoding panics.
type panicky struct{}

func (panicky) EncodedLen() int              { return 2 }
func (panicky) AppendJSON(dst []byte) []byte { panic("secret-value") }

func TestK25_PayloadPanicIsContained(t *testing.T) {
	st := open(t, dbPath(t))
	rec := &eventRecorder{}
	l := newLog(t, "run-x", rec)
	_, err := l.Append(context.Background(), eventlog.Record{Kind: "run.started", Time: t0, Payload: panicky{}})
	require.NoError(t, err)
	err = st.Observe(context.Background(), rec.events[0])
	require.ErrorIs(t, err, store.ErrPayloadPanic)
	require.NotContains(t, err.Error(), "secret-value")
	var b strings.Builder
	require.ErrorIs(t, st.ReplayJSON(context.Background(), &b, "run-x"), store.ErrNotFound)
}
