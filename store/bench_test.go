package store_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// benchRoot is the one directory every benchmark of this package writes
// in, so that BenchmarkFsync and BenchmarkStoreObserver sync files of the
// same file system, directory and run. TestMain removes it.
var (
	benchRootOnce sync.Once
	benchRoot     string
	benchRootErr  error
)

func benchDir(b *testing.B) string {
	benchRootOnce.Do(func() { benchRoot, benchRootErr = os.MkdirTemp("", "store-bench-") })
	root, err := benchRoot, benchRootErr
	require.NoError(b, err)
	dir, err := os.MkdirTemp(root, "")
	require.NoError(b, err)
	b.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// walFrame is one page of the write-ahead log as SQLite writes it: a
// 24-byte frame header and a 4096-byte page.
const walFrame = 24 + 4096

// BenchmarkFsync is the disk's raw rate, the baseline of
// BenchmarkStoreObserver: each iteration writes one WAL frame's worth of
// bytes and syncs the file (fsync, as SQLite does). The file is written
// once to its full 4 MiB first and then overwritten in a cycle, as the WAL
// is in steady state (a checkpointed WAL restarts from its start), so a
// sync carries data, not a growing file's metadata.
func BenchmarkFsync(b *testing.B) {
	const size = 1000 * walFrame // SQLite's default auto-checkpoint, in frames
	f, err := os.Create(filepath.Join(benchDir(b), "fsync"))
	require.NoError(b, err)
	defer f.Close()
	_, err = f.Write(make([]byte, size))
	require.NoError(b, err)
	require.NoError(b, f.Sync())
	buf := make([]byte, walFrame)
	off := int64(0)
	cpu0 := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := f.WriteAt(buf, off); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if off += walFrame; off+walFrame > size {
			off = 0
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/sync")
}

// BenchmarkStoreObserver measures durable events per second: each
// iteration is one event appended to a log whose required observer is the
// store, so it returns only after the event's commit synced the WAL
// (synchronous=FULL, checked below). logs=N is N logs appending at once,
// one goroutine each, sharing commits (group commit); logs=1 is one event
// per commit, which BenchmarkFsync bounds.
func BenchmarkStoreObserver(b *testing.B) {
	for _, logs := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("logs=%d", logs), func(b *testing.B) { benchObserver(b, logs) })
	}
}

func benchObserver(b *testing.B, logs int) {
	ctx := context.Background()
	st := open(b, filepath.Join(benchDir(b), "spice.db"))
	requireFull(b, st)
	p := event.ToolProgress{OperationID: "op-1", CallID: "call-1", Message: "step"}
	cpu0, w0 := cpuTime(), written()
	defer func() {
		b.ReportMetric(float64(written()-w0)/float64(b.N), "B-written/event")
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "events/s")
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/event")
	}()
	if logs == 1 {
		l := newLog(b, "run-bench", st)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := l.Append(ctx, event.Record(t0, p)); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	var n atomic.Int64
	// RunParallel starts parallelism×GOMAXPROCS goroutines; those beyond
	// logs take no work, so exactly logs goroutines append.
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((logs + procs - 1) / procs)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := n.Add(1)
		if i > int64(logs) {
			return
		}
		l := newLog(b, fmt.Sprintf("run-%d", i), st)
		for pb.Next() {
			if _, err := l.Append(ctx, event.Record(t0, p)); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// written is how many bytes the process has handed to write system calls
// (wchar of /proc/self/io; 0 where there is none): what a commit writes,
// independent of how busy the disk is.
func written() int64 {
	raw, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for line := range strings.Lines(string(raw)) {
		if v, ok := strings.CutPrefix(line, "wchar: "); ok {
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return n
		}
	}
	return 0
}

// cpuTime is the process's user and system CPU time so far: with the
// machine's other load it tells CPU spent per event from waiting.
func cpuTime() time.Duration {
	var u syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &u) != nil {
		return 0
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// BenchmarkSQLiteFloor is what SQLite itself costs for the store's rows on
// this machine, in the same run as BenchmarkFsync and
// BenchmarkStoreObserver: a file the store made (its schema and 1 KiB
// pages), opened with plain database/sql in WAL mode with
// synchronous=FULL, and the writer's own statements (BEGIN IMMEDIATE, the
// events INSERT, COMMIT) run directly on one connection by the benchmark's
// goroutine, with no queue, no handoff between goroutines and no derived
// tables. SQLite checkpoints by itself, inside the commit that reaches
// 4,000 frames; the writer checkpoints between batches, at an estimate
// from above of its frames, so somewhat more often. rows=1 commits one
// event per transaction, the floor under StoreObserver/logs=1; rows=64
// commits one event of each of 64 logs per transaction, as many as
// StoreObserver/logs=64's logs can share. The two are measured seconds
// apart, and this disk's rate moves by half within seconds: compare them
// alternately, not by one run's medians.
func BenchmarkSQLiteFloor(b *testing.B) {
	for _, rows := range []int{1, 64} {
		b.Run(fmt.Sprintf("rows=%d", rows), func(b *testing.B) { benchFloor(b, rows) })
	}
}

func benchFloor(b *testing.B, rows int) {
	ctx := context.Background()
	path := filepath.Join(benchDir(b), "spice.db")
	st, err := store.Open(ctx, path)
	require.NoError(b, err)
	require.NoError(b, st.Close())
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)&_journal_mode=WAL&_pragma=synchronous(FULL)")
	require.NoError(b, err)
	defer db.Close()
	conn, err := db.Conn(ctx)
	require.NoError(b, err)
	defer conn.Close()
	var mode string
	var sync int
	require.NoError(b, conn.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode))
	require.NoError(b, conn.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&sync))
	require.Equal(b, "wal", mode)
	require.Equal(b, 2, sync, "synchronous=FULL")
	_, err = conn.ExecContext(ctx, "PRAGMA wal_autocheckpoint = 4000")
	require.NoError(b, err)
	var pageSize, spacing int
	require.NoError(b, conn.QueryRowContext(ctx, "PRAGMA page_size").Scan(&pageSize))
	require.NoError(b, conn.QueryRowContext(ctx, "PRAGMA wal_autocheckpoint").Scan(&spacing))
	require.Equal(b, [2]int{1024, 4000}, [2]int{pageSize, spacing}, "the store's pages, checkpoints every 4,000 frames")
	var stmts []*sql.Stmt
	defer func() {
		for _, s := range stmts {
			s.Close()
		}
	}()
	prepare := func(q string) *sql.Stmt {
		s, err := conn.PrepareContext(ctx, q)
		require.NoError(b, err)
		stmts = append(stmts, s)
		return s
	}
	begin, commit := prepare("BEGIN IMMEDIATE"), prepare("COMMIT")
	insert := prepare(`INSERT INTO events (log, seq, kind, time, body) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (log, seq) DO NOTHING`)
	// The rows BenchmarkStoreObserver writes: its event's canonical bytes,
	// with each row's own sequence.
	logs := make([]string, rows)
	for i := range logs {
		logs[i] = fmt.Sprintf("run-%d", i+1)
	}
	p := event.ToolProgress{OperationID: "op-1", CallID: "call-1", Message: "step"}
	l := newLog(b, "run-floor")
	e, err := l.Append(ctx, event.Record(t0, p))
	require.NoError(b, err)
	prefix, suffix, ok := strings.Cut(string(e.AppendJSON(nil)), `"seq":1,`)
	require.True(b, ok, "the envelope holds its sequence")
	ts := t0.Format(eventlog.TimeLayout)
	var body []byte
	seq := int64(0)
	cpu0 := cpuTime()
	b.ReportAllocs()
	for b.Loop() {
		seq++
		if _, err := begin.ExecContext(ctx); err != nil {
			b.Fatal(err)
		}
		for _, log := range logs {
			body = append(strconv.AppendInt(append(append(body[:0], prefix...), `"seq":`...), seq, 10), ',')
			body = append(body, suffix...)
			if _, err := insert.ExecContext(ctx, log, seq, e.Kind(), ts, body); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := commit.ExecContext(ctx); err != nil {
			b.Fatal(err)
		}
	}
	events := float64(b.N * rows)
	b.ReportMetric(events/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/events, "cpu-µs/event")
	// ON CONFLICT DO NOTHING would skip a row silently: every one counts.
	var n int
	require.NoError(b, conn.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n))
	require.Equal(b, b.N*rows, n, "every row was written")
}

func requireFull(b *testing.B, st *store.Store) {
	d, err := st.Durability(context.Background())
	require.NoError(b, err)
	require.Equal(b, store.Durability{JournalMode: "wal", Synchronous: "FULL"}, d)
}
