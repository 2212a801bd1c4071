package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/store"
)

// refusing stands for a store that refuses the at-th event it is told of
// (counting every log, from 1), or every event from the at-th on when from
// is set (a disk that filled up). Other events reach the real store, or,
// when memory is set, are kept here instead (the pair timeline's lines):
// SQLite's syncs would make a run per index slow.
type refusing struct {
	inner  eventlog.Observer
	at     int
	from   bool
	memory bool

	mu    sync.Mutex
	n     int
	pairs []string     // the logs of the pair.started events it was told of
	kept  bytes.Buffer // memory: the accepted timeline events' lines
}

var errRefused = errors.New("the test's store refuses this event")

func (r *refusing) Observe(ctx context.Context, e eventlog.Event) error {
	r.mu.Lock()
	r.n++
	n := r.n
	if e.Kind() == "pair.started" {
		r.pairs = append(r.pairs, e.Log())
	}
	r.mu.Unlock()
	if n == r.at || r.from && r.at > 0 && n > r.at {
		return errRefused
	}
	if !r.memory {
		return r.inner.Observe(ctx, e)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.pairs) > 0 && e.Log() == r.pairs[0] {
		r.kept.Write(e.AppendJSON(nil))
		r.kept.WriteByte('\n')
	}
	return nil
}

func (r *refusing) told() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.pairs
}

// runRefusing runs the built-in pair in process, recording into a new
// store through r, and returns what it printed and what the store holds of
// the pair timeline.
func runRefusing(t *testing.T, r *refusing, asJSON bool) (stdout, stderr, stored string, code int) {
	t.Helper()
	db := filepath.Join(t.TempDir(), "runs.db")
	args := []string{"run", "--store", db}
	if asJSON {
		args = append(args, "--json")
	}
	var out, errOut bytes.Buffer
	getenv := func(k string) string {
		if k == "HOME" {
			return t.TempDir()
		}
		return ""
	}
	code = Main(context.Background(), args, Env{Stdout: &out, Stderr: &errOut, Getenv: getenv,
		wrapStore: func(o eventlog.Observer) eventlog.Observer { r.inner = o; return r }})
	_, pairs := r.told()
	require.Len(t, pairs, 1, errOut.String())
	if r.memory {
		r.mu.Lock()
		defer r.mu.Unlock()
		return out.String(), errOut.String(), r.kept.String(), code
	}
	st, err := store.OpenConfig(context.Background(), store.Config{Path: db, ReadOnly: true})
	require.NoError(t, err)
	defer st.Close()
	var buf bytes.Buffer
	if err := st.ReplayJSON(context.Background(), &buf, pairs[0]); !errors.Is(err, store.ErrNotFound) {
		require.NoError(t, err)
	}
	return out.String(), errOut.String(), buf.String(), code
}

// A store that refuses an event, at every index of the built-in pair, once
// or from there on: what `run --json` printed is exactly what the store
// holds of the timeline, and the summary never says "recorded" for a pair
// whose store refused an event: printing comes after the store's
// acknowledgement, so a SIGKILL or a full disk cannot leave a printed
// event that replay lacks. The clean run records
// into SQLite and compares with its replay; the refusing runs keep what
// they accept in memory.
func TestK16_RunPrintsOnlyWhatTheStoreAcknowledged(t *testing.T) {
	clean := &refusing{}
	stdout, stderr, stored, code := runRefusing(t, clean, true)
	require.Equal(t, ExitOK, code, stderr)
	require.Equal(t, stored, stdout, "an accepting store holds what was printed")
	total, _ := clean.told()
	require.Greater(t, total, 90)
	require.Equal(t, total, strings.Count(stored, "\n"),
		"the store is told of the timeline only: each run event once, relayed")

	for at := 1; at <= total; at++ {
		for _, from := range []bool{false, true} {
			if from && at%8 != 1 {
				continue // a full disk at every eighth index is enough
			}
			name := strconv.Itoa(at)
			if from {
				name += "-on"
			}
			t.Run(name, func(t *testing.T) {
				// The readable output for every third index keeps the
				// test's time down; the JSON one for every index.
				asJSON := at%3 != 0
				stdout, stderr, stored, code := runRefusing(t, &refusing{at: at, from: from, memory: true}, asJSON)
				require.Equal(t, ExitFailed, code, "a store that refuses an event fails the pair")
				require.Contains(t, stderr, "the store refused")
				require.NotContains(t, stdout, "recorded: ")
				if asJSON {
					require.Equal(t, stored, stdout, "printed is what the store holds")
					return
				}
				require.Contains(t, stdout, "recorded in part")
				var want bytes.Buffer
				r := render.New(&want, render.Options{})
				for line := range bytes.Lines([]byte(stored)) {
					require.NoError(t, r.Line(line))
				}
				require.Contains(t, stdout, want.String(), "what was shown is what the store holds")
			})
		}
	}
}

// refusingRun stands for a store that refuses the at-th relayed run event
// it is told of and accepts every other event without keeping it.
type refusingRun struct {
	at int

	mu  sync.Mutex
	n   int
	log string // the refused event's run and sequence
	seq uint64
}

func (r *refusingRun) Observe(_ context.Context, e eventlog.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	rel, ok := e.Payload().(orchestrator.Relayed)
	if !ok {
		return nil
	}
	r.n++
	if r.n == r.at {
		r.log, r.seq = string(rel.RunID()), rel.RunSeq()
		return errRefused
	}
	return nil
}

// A run event the store refused is not printed either: the printer sees a
// relayed run event only once the store acknowledged it, so what stderr
// says ("not printed") holds.
func TestK16_RunDoesNotPrintARunEventTheStoreRefused(t *testing.T) {
	for _, at := range []int{1, 2, 3, 5, 8} {
		t.Run(strconv.Itoa(at), func(t *testing.T) {
			r := &refusingRun{at: at}
			db := filepath.Join(t.TempDir(), "runs.db")
			var out, errOut bytes.Buffer
			home := t.TempDir()
			getenv := func(k string) string {
				if k == "HOME" {
					return home
				}
				return ""
			}
			code := Main(context.Background(), []string{"run", "--store", db, "--json"},
				Env{Stdout: &out, Stderr: &errOut, Getenv: getenv,
					wrapStore: func(eventlog.Observer) eventlog.Observer { return r }})
			require.Equal(t, ExitFailed, code, errOut.String())
			require.Contains(t, errOut.String(), "the store refused 1 events")
			r.mu.Lock()
			log, seq := r.log, r.seq
			r.mu.Unlock()
			require.NotEmpty(t, log)
			for line := range bytes.Lines(out.Bytes()) {
				var ev struct {
					Payload struct {
						RunID  string `json:"run_id"`
						RunSeq uint64 `json:"run_seq"`
					} `json:"payload"`
				}
				require.NoError(t, json.Unmarshal(line, &ev))
				require.False(t, ev.Payload.RunID == log && ev.Payload.RunSeq == seq,
					"printed %s, the run event the store refused", line)
			}
		})
	}
}
