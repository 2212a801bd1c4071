package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"math"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// rowFunc takes one recorded event of a log of type t: its sequence, kind,
// time column and canonical bytes, which it may keep.
type rowFunc func(t logType, seq int64, kind, ts string, body []byte) error

// readLog calls fn with each recorded event of log in sequence order and
// reports whether there was any.
//
// A log with rows of its own is read from them. A run that was told to the
// store only through the timeline of a pair it played in, as a composed
// pair's runs are, has none: its events are read back out of the pair's
// rows. The relay keeps a run event's kind and time and wraps its payload
// bytes unchanged, so the run's canonical bytes are rebuilt exactly.
func readLog(ctx context.Context, q querier, log string, fn rowFunc) (bool, error) {
	var t string
	err := q.QueryRowContext(ctx, `SELECT type FROM logs WHERE log = ?`, log).Scan(&t)
	switch {
	case err == nil:
		return ownRows(ctx, q, logType(t), log, 1, fn)
	case errors.Is(err, sql.ErrNoRows):
		return relayedRows(ctx, q, log, fn)
	}
	return false, err
}

// ownRows reads the rows of log from sequence from on.
func ownRows(ctx context.Context, q querier, t logType, log string, from int64, fn rowFunc) (bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT seq, kind, time, body FROM events WHERE log = ? AND seq >= ? ORDER BY seq`, log, from)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	found := false
	for rows.Next() {
		var seq int64
		var kind, ts string
		var body []byte
		if err := rows.Scan(&seq, &kind, &ts, &body); err != nil {
			return false, err
		}
		found = true
		if err := fn(t, seq, kind, ts, body); err != nil {
			return false, err
		}
	}
	return found, rows.Err()
}

// relayedRows reads run's events out of the timelines of the pairs it
// played in, from the first relayed one on. An event relayed again (by a
// resumed pair, or a second one) is read once, where it came first.
func relayedRows(ctx context.Context, q querier, run string, fn rowFunc) (bool, error) {
	type start struct {
		pair string
		seq  int64
	}
	var starts []start
	rows, err := q.QueryContext(ctx, `SELECT pair_id, first_seq FROM pair_runs WHERE run_id = ? ORDER BY first_seq, pair_id`, run)
	if err != nil {
		return false, err
	}
	for rows.Next() {
		var s start
		if err := rows.Scan(&s.pair, &s.seq); err != nil {
			rows.Close()
			return false, err
		}
		starts = append(starts, s)
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return false, err
	}
	// A relayed envelope names its run as a JSON string; rows that do not
	// hold that string are another run's and are not parsed.
	name := eventlog.AppendString(nil, run)
	var last uint64
	for _, s := range starts {
		_, err := ownRows(ctx, q, logPair, s.pair, s.seq, func(_ logType, seq int64, kind, ts string, body []byte) error {
			if isPairKind(kind) || !bytes.Contains(body, name) {
				return nil
			}
			if _, err := decodeRow(logPair, s.pair, seq, kind, ts, body); err != nil {
				return err
			}
			runSeq, ev, ok := runEventOf(run, kind, ts, body)
			if !ok || runSeq <= last {
				return nil
			}
			last = runSeq
			return fn(logRun, int64(runSeq), kind, ts, ev)
		})
		if err != nil {
			return false, err
		}
	}
	return last > 0, nil
}

// runEventOf rebuilds the event of run that a relayed pair row holds: its
// run sequence and the bytes the run's own log encoded it as (eventlog's
// canonical envelope: sequence, kind, time and payload, in that order).
// It reports false for a row that relays no event of run.
func runEventOf(run, kind, ts string, body []byte) (uint64, []byte, bool) {
	f, ok := readPairFields(payloadOf(body))
	if !ok {
		return 0, nil, false
	}
	r, ok := f.relayOf()
	if !ok || r.RunID != run || r.RunSeq == 0 || r.RunSeq > math.MaxInt64 || len(f.Payload) == 0 {
		return 0, nil, false
	}
	b := make([]byte, 0, len(`{"seq":,"kind":,"time":"","payload":}`)+20+len(kind)+2+len(ts)+len(f.Payload))
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.RunSeq, 10)
	b = append(b, `,"kind":`...)
	b = eventlog.AppendString(b, kind)
	b = append(b, `,"time":"`...)
	b = append(b, ts...)
	b = append(b, `","payload":`...)
	b = append(b, f.Payload...)
	return r.RunSeq, append(b, '}'), true
}
