package store_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// crashEnv, when set to a database path, makes the test binary the writer
// process of TestCrashMidPairKeepsAcknowledgedEvents instead of running
// tests.
const crashEnv = "SPICE_STORE_CRASH_WRITER"

const (
	crashPair = "pair-crash"
	crashRun  = "run-crash"
	crashCall = "op-write"
)

// acker prints every event the store acknowledged: it is the required
// observer after the store, so the log calls it only when the store's
// Observe returned nil.
type acker struct {
	mu sync.Mutex
	w  *os.File
}

func (a *acker) Observe(_ context.Context, e eventlog.Event) error {
	sum := sha256.Sum256(e.AppendJSON(nil))
	a.mu.Lock()
	defer a.mu.Unlock()
	_, err := fmt.Fprintf(a.w, "ack %s %d %s %s\n", e.Log(), e.Seq(), e.Kind(), hex.EncodeToString(sum[:]))
	return err
}

// crashWriter records a pair whose writer run starts a mutating tool call
// and then reports progress until the process is killed.
func crashWriter(path string) int {
	ctx := context.Background()
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "crash writer:", err)
		return 2
	}
	st, err := store.Open(ctx, path)
	if err != nil {
		return fail(err)
	}
	ack := &acker{w: os.Stdout}
	cfg := eventlog.Config{MaxEvents: 1 << 10, MaxBytes: 1 << 24}
	pc := cfg
	pc.Name, pc.Required = crashPair, []eventlog.Observer{st, ack}
	pair, err := eventlog.New(pc)
	if err != nil {
		return fail(err)
	}
	rc := cfg
	rc.Name, rc.Required = crashRun, []eventlog.Observer{st, ack, relay{pair: pair, worker: "writer"}}
	run, err := eventlog.New(rc)
	if err != nil {
		return fail(err)
	}
	clock := &enginetest.Clock{Start: t0}
	started, err := eventlog.NewRaw([]byte(`{"pair_id":"` + crashPair + `","plan_id":"plan-1","workers":["writer","reviewer"]}`))
	if err != nil {
		return fail(err)
	}
	if _, err := pair.Append(ctx, eventlog.Record{Kind: "pair.started", Time: clock.Now(), Payload: started}); err != nil {
		return fail(err)
	}
	for _, p := range []event.Payload{
		event.RunStarted{RunID: crashRun, PlanID: "plan-1", PlanFingerprint: "ab", Definition: "writer", Model: "scripted-1"},
		event.TurnStarted{RunID: crashRun, TurnID: "turn-1"},
		event.ModelStarted{TurnID: "turn-1", OperationID: "op-model"},
		event.ModelCompleted{OperationID: "op-model", InputTokens: 10, OutputTokens: 2, ToolCalls: 1},
		event.ToolStarted{TurnID: "turn-1", OperationID: crashCall, CallID: "call-1", Name: "write", Effect: "mutating", Replay: "unsafe"},
	} {
		if _, err := run.Append(ctx, event.Record(clock.Now(), p)); err != nil {
			return fail(err)
		}
	}
	for i := range 1 << 20 { // killed long before
		p := event.ToolProgress{OperationID: crashCall, CallID: "call-1", Message: "step " + strconv.Itoa(i)}
		if _, err := run.Append(ctx, event.Record(clock.Now(), p)); err != nil {
			return fail(err)
		}
	}
	return 0
}

type ackLine struct {
	log  string
	seq  uint64
	kind string
	sum  string
}

func TestK16_SIGKILLMidPairKeepsAcknowledgedEvents(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a writer process")
	}
	path := dbPath(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+path)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	// Read acknowledgements until the mutating call has started and 20 more
	// events were acknowledged, then kill the writer wherever it is.
	var acks []ackLine
	sc := bufio.NewScanner(stdout)
	afterCall := -1
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		require.Len(t, f, 5, "writer printed %q", sc.Text())
		seq, err := strconv.ParseUint(f[2], 10, 64)
		require.NoError(t, err)
		acks = append(acks, ackLine{log: f[1], seq: seq, kind: f[3], sum: f[4]})
		if f[3] == "tool.started" && f[1] == crashRun {
			afterCall = 0
		} else if afterCall >= 0 {
			afterCall++
		}
		if afterCall >= 20 {
			break
		}
	}
	require.GreaterOrEqual(t, afterCall, 20, "writer stopped early: %s", stderr.String())
	require.NoError(t, cmd.Process.Kill()) // SIGKILL
	killed = true
	// Lines already in the pipe were acknowledged too.
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 5 {
			continue // a line cut by the kill was never complete
		}
		seq, err := strconv.ParseUint(f[2], 10, 64)
		require.NoError(t, err)
		acks = append(acks, ackLine{log: f[1], seq: seq, kind: f[3], sum: f[4]})
	}
	werr := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, werr, &ee)
	require.False(t, ee.Exited(), "the writer was killed, it did not exit")

	// The raw file: intact, no torn rows, every log gap-free from 1.
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	var check string
	require.NoError(t, db.QueryRow("PRAGMA integrity_check").Scan(&check))
	require.Equal(t, "ok", check)
	stored := map[string]map[uint64]string{}
	rows, err := db.Query("SELECT log, seq, kind, time, body FROM events ORDER BY log, seq")
	require.NoError(t, err)
	for rows.Next() {
		var log, kind, ts string
		var seq uint64
		var body []byte
		require.NoError(t, rows.Scan(&log, &seq, &kind, &ts, &body))
		e, err := eventlog.Decode(body)
		require.NoError(t, err, "row %s/%d is torn", log, seq)
		require.Equal(t, seq, e.Seq())
		require.Equal(t, kind, e.Kind())
		require.Equal(t, ts, e.Time().Format(eventlog.TimeLayout))
		if stored[log] == nil {
			stored[log] = map[uint64]string{}
		}
		require.Len(t, stored[log], int(seq-1), "log %s has a gap before %d", log, seq)
		sum := sha256.Sum256(body)
		stored[log][seq] = hex.EncodeToString(sum[:])
	}
	require.NoError(t, rows.Err())
	require.NoError(t, db.Close())

	t.Logf("killed after %d acknowledged events; the file holds %d (pair) + %d (run) rows",
		len(acks), len(stored[crashPair]), len(stored[crashRun]))
	// Every acknowledged event is there with the bytes that were
	// acknowledged.
	for _, a := range acks {
		require.Equal(t, a.sum, stored[a.log][a.seq], "acknowledged %s/%d (%s) is missing or different", a.log, a.seq, a.kind)
	}

	// Opening recovers: the pair and its run are interrupted, the mutating
	// call that never ended is uncertain.
	st := open(t, path)
	rec := st.Recovery()
	require.Equal(t, []string{crashPair}, rec.Pairs)
	require.Equal(t, []string{crashRun}, rec.Runs)
	require.Len(t, rec.Uncertain, 1)
	require.Equal(t, crashCall, rec.Uncertain[0].OperationID)
	require.Equal(t, store.CallUncertain, rec.Uncertain[0].Status)

	pair, err := st.Pair(context.Background(), crashPair)
	require.NoError(t, err)
	require.Equal(t, store.StatusInterrupted, pair.Summary.Status)
	require.Zero(t, pair.Summary.Duration())
	require.Len(t, pair.Runs, 1)
	require.Equal(t, store.StatusInterrupted, pair.Runs[0].Status)
	require.Len(t, pair.Uncertain, 1)
	require.True(t, pair.Uncertain[0].Uncertain())
	require.Equal(t, "write", pair.Uncertain[0].Name)
	require.Equal(t, uint64(len(stored[crashPair])), uint64(len(pair.Events)))

	// The replay is the stored rows, acknowledged prefix included.
	out := replay(t, st, crashRun)
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	require.Len(t, lines, len(stored[crashRun]))
}
