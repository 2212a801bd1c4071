package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// The store path `runs list` names comes from a flag or the environment:
// it is shown escaped like every other value, never with its raw control
// bytes (issue 16, item 1).
func TestRunsListShowsTheStorePathEscaped(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a\x1b]0;pwned\x07b")
	for name, args := range map[string][]string{
		"no store yet":   {"runs", "list", "--store", filepath.Join(dir, "none.db")},
		"an empty store": {"runs", "list", "--store", filepath.Join(dir, "empty.db")},
	} {
		t.Run(name, func(t *testing.T) {
			if name == "an empty store" {
				st, err := openStore(t.Context(), args[3], true)
				require.NoError(t, err)
				require.NoError(t, st.Close())
			}
			out, stderr, code := call(t, nil, args...)
			require.Equal(t, 0, code, stderr)
			require.NotContains(t, out, "\x1b", "raw ESC on stdout")
			require.NotContains(t, out, "\x07", "raw BEL on stdout")
			require.True(t, strings.Contains(out, `a\x1b]0;pwned\x07b`), out)
		})
	}
}

// refusingRun stands for a store that refuses the at-th event of a run
// log it is told of (a run log's name holds a '/', a pair's does not) and
// accepts every other event without keeping it.
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
	if !strings.Contains(e.Log(), "/") {
		return nil
	}
	r.n++
	if r.n == r.at {
		r.log, r.seq = e.Log(), e.Seq()
		return errRefused
	}
	return nil
}

// A run event the store refused in its run's log is not printed either:
// the printer sees a relayed run event only once the store acknowledged
// the run's own copy, so what stderr says ("not printed") holds (issue 16,
// item 3).
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
