package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Status is a run's or a pair's state as recorded.
type Status string

const (
	StatusRunning   Status = "running" // started, no terminal yet
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
	// StatusInterrupted: no terminal was recorded and the open that
	// recorded it (its owner, owner.go) is gone: its process ended or it
	// was closed. Reads show it so at once; a writable Open marks it.
	StatusInterrupted Status = "interrupted"
)

// CallStatus is a tool call's state as recorded.
type CallStatus string

const (
	CallStarted   CallStatus = "started"
	CallCompleted CallStatus = "completed"
	CallFailed    CallStatus = "failed"
	CallCancelled CallStatus = "cancelled"
	// CallUncertain: a mutating call started and no terminal was recorded.
	// Its effect may have happened; it must never run again automatically.
	CallUncertain CallStatus = "uncertain"
	// CallInterrupted: a call without mutation started and no terminal was
	// recorded.
	CallInterrupted CallStatus = "interrupted"
)

// Call is one tool call of a run.
type Call struct {
	RunID       string
	OperationID string
	CallID      string
	Name        string
	Effect      string // "read_only" or "mutating"; empty for a tool the plan lacked
	Replay      string // "safe", "idempotent" or "unsafe"
	StartedSeq  uint64 // the run sequence of tool.started
	EndedSeq    uint64 // the run sequence of its terminal; 0 without one
	Status      CallStatus
	Outcome     string // a failed or cancelled call's outcome: "definitive" or "uncertain"
}

// Uncertain reports whether the call's effect is unknown: it started and
// never ended (CallUncertain), or the engine recorded its outcome as
// uncertain. Such a call must not be run again automatically.
func (c Call) Uncertain() bool { return c.Status == CallUncertain || c.Outcome == "uncertain" }

// PairSummary is one pair as `runs list` shows it.
type PairSummary struct {
	ID      string
	Status  Status
	Reason  string // the terminal's reason, if any
	PlanID  string
	Workers []string
	Started time.Time // zero if the pair's start was not recorded
	Ended   time.Time // zero without a terminal
	// Submitted is when the pair was accepted, where the history knows
	// it apart from Started (a job backend, whose pairs wait in a queue):
	// listings are newest submission first. Zero means Started.
	Submitted time.Time
}

// Duration is Ended minus Started, or 0 while either is unknown.
func (p PairSummary) Duration() time.Duration { return span(p.Started, p.Ended) }

// RunSummary is one run.
type RunSummary struct {
	ID             string
	PairID         string // the pair that relayed it, if any
	Worker         string // its worker in that pair
	Status         Status
	ProblemCode    string // a failed run's problem
	ProblemMessage string
	PlanID         string
	Definition     string
	Model          string
	Started        time.Time
	Ended          time.Time
	Turns          int
	InputTokens    int64
	OutputTokens   int64
}

// Duration is Ended minus Started, or 0 while either is unknown.
func (r RunSummary) Duration() time.Duration { return span(r.Started, r.Ended) }

func span(from, to time.Time) time.Duration {
	if from.IsZero() || to.IsZero() {
		return 0
	}
	return to.Sub(from)
}

// PairRecord is one pair with its runs, its timeline in order and the
// calls whose effect is unknown.
type PairRecord struct {
	Summary   PairSummary
	Runs      []RunSummary // in the order the timeline first mentions them
	Events    []Entry      // the pair timeline, by sequence
	Uncertain []Call       // uncertain calls of the pair's runs
}

// RunRecord is one run with its events and calls.
type RunRecord struct {
	Summary   RunSummary
	Events    []Entry // the run's own log, by sequence; empty if only relayed
	Calls     []Call  // by start sequence
	Uncertain []Call
}

// ListOptions selects what ListPairs and ListRuns return.
type ListOptions struct {
	// Limit is how many to return, newest first. Default DefaultListLimit,
	// at most MaxListLimit.
	Limit int
	// Status, if set, keeps only that status.
	Status Status
}

const (
	DefaultListLimit = 100
	MaxListLimit     = 10000
)

func (o ListOptions) limit() (int, error) {
	switch {
	case o.Limit == 0:
		return DefaultListLimit, nil
	case o.Limit < 0:
		return 0, bound.Malformedf("store.list.limit", "must not be negative")
	}
	if err := bound.Count("store.list.limit", o.Limit, MaxListLimit); err != nil {
		return 0, err
	}
	return o.Limit, nil
}

// readTx starts a read transaction: every query in it sees one snapshot.
// live is the :live parameter of the effective statuses (owner.go),
// checked in that snapshot.
func (s *Store) readTx(ctx context.Context) (tx *sql.Tx, live sql.NamedArg, err error) {
	s.mu.RLock()
	closed := s.closed
	s.mu.RUnlock()
	if closed {
		return nil, live, ErrClosed
	}
	if tx, err = s.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true}); err != nil {
		return nil, live, err
	}
	owners, _, err := s.liveOwners(ctx, tx)
	if err != nil {
		tx.Rollback()
		return nil, live, err
	}
	return tx, sql.Named("live", owners), nil
}

var pairColumns = `p.pair_id, p.plan_id, p.workers, p.started_at, p.ended_at, ` + pairStatusSQL + `, p.reason`

// ListPairs returns pairs, most recently started first.
func (s *Store) ListPairs(ctx context.Context, o ListOptions) ([]PairSummary, error) {
	n, err := o.limit()
	if err != nil {
		return nil, err
	}
	tx, live, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, `SELECT `+pairColumns+` FROM pairs p
		WHERE :status = '' OR (`+pairStatusSQL+`) = :status ORDER BY p.started_at DESC, p.pair_id LIMIT :limit`,
		live, sql.Named("status", string(o.Status)), sql.Named("limit", n))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []PairSummary
	for rows.Next() {
		p, err := scanPair(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

var runColumns = `r.run_id, COALESCE((SELECT pair_id FROM pair_runs WHERE run_id = r.run_id ORDER BY first_seq LIMIT 1), ''),
	COALESCE((SELECT worker FROM pair_runs WHERE run_id = r.run_id ORDER BY first_seq LIMIT 1), ''),
	` + runStatusSQL + `, r.problem_code, r.problem_message, r.plan_id, r.definition, r.model,
	r.started_at, r.ended_at, r.turns, r.input_tokens, r.output_tokens`

// ListRuns returns runs, most recently started first.
func (s *Store) ListRuns(ctx context.Context, o ListOptions) ([]RunSummary, error) {
	n, err := o.limit()
	if err != nil {
		return nil, err
	}
	tx, live, err := s.readTx(ctx)
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	return queryRuns(ctx, tx, `SELECT `+runColumns+` FROM runs r
		WHERE :status = '' OR (`+runStatusSQL+`) = :status ORDER BY r.started_at DESC, r.run_id LIMIT :limit`,
		live, sql.Named("status", string(o.Status)), sql.Named("limit", n))
}

// Pair returns one pair: its summary, its runs, its whole timeline and its
// uncertain calls, read in one snapshot. An unknown ID is ErrNotFound.
func (s *Store) Pair(ctx context.Context, pairID string) (PairRecord, error) {
	tx, live, err := s.readTx(ctx)
	if err != nil {
		return PairRecord{}, err
	}
	defer tx.Rollback()
	var rec PairRecord
	rec.Summary, err = scanPair(tx.QueryRowContext(ctx, `SELECT `+pairColumns+` FROM pairs p WHERE p.pair_id = :id`,
		live, sql.Named("id", pairID)))
	if errors.Is(err, sql.ErrNoRows) {
		return PairRecord{}, ErrNotFound
	}
	if err != nil {
		return PairRecord{}, err
	}
	if rec.Runs, err = queryRuns(ctx, tx, `SELECT `+runColumns+` FROM pair_runs pr JOIN runs r ON r.run_id = pr.run_id
		WHERE pr.pair_id = :id ORDER BY pr.first_seq`, live, sql.Named("id", pairID)); err != nil {
		return PairRecord{}, err
	}
	if rec.Events, err = entries(ctx, tx, pairID); err != nil {
		return PairRecord{}, err
	}
	if rec.Uncertain, err = queryCalls(ctx, tx, `WHERE c.run_id IN (SELECT run_id FROM pair_runs WHERE pair_id = :id)
		AND ((`+callStatusSQL+`) = 'uncertain' OR c.outcome = 'uncertain')`, live, sql.Named("id", pairID)); err != nil {
		return PairRecord{}, err
	}
	return rec, nil
}

// Run returns one run: its summary, its own log and its calls, read in one
// snapshot. An unknown ID is ErrNotFound.
func (s *Store) Run(ctx context.Context, runID string) (RunRecord, error) {
	tx, live, err := s.readTx(ctx)
	if err != nil {
		return RunRecord{}, err
	}
	defer tx.Rollback()
	runs, err := queryRuns(ctx, tx, `SELECT `+runColumns+` FROM runs r WHERE r.run_id = :id`, live, sql.Named("id", runID))
	if err != nil {
		return RunRecord{}, err
	}
	if len(runs) == 0 {
		return RunRecord{}, ErrNotFound
	}
	rec := RunRecord{Summary: runs[0]}
	if rec.Events, err = entries(ctx, tx, runID); err != nil {
		return RunRecord{}, err
	}
	if rec.Calls, err = queryCalls(ctx, tx, `WHERE c.run_id = :id`, live, sql.Named("id", runID)); err != nil {
		return RunRecord{}, err
	}
	for _, c := range rec.Calls {
		if c.Uncertain() {
			rec.Uncertain = append(rec.Uncertain, c)
		}
	}
	return rec, nil
}

// ReplayJSON writes the recorded events of a log (a run ID or a pair ID)
// to w in sequence order, each as its recorded canonical bytes followed by
// "\n": byte for byte what the live JSON stream printed. Every row is
// checked to decode to the event its columns describe before it is
// written; a row that does not is an *IntegrityError. A log without events
// is ErrNotFound.
func (s *Store) ReplayJSON(ctx context.Context, w io.Writer, log string) error {
	tx, _, err := s.readTx(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	found, err := readLog(ctx, tx, log, func(_ logType, seq int64, kind, ts string, body []byte) error {
		if _, err := decodeRow(logOther, log, seq, kind, ts, body); err != nil {
			return err
		}
		_, err := w.Write(append(body, '\n'))
		return err
	})
	if err != nil {
		return err
	}
	if !found {
		return ErrNotFound
	}
	return nil
}

// entries reads a log's events in order.
func entries(ctx context.Context, q querier, log string) ([]Entry, error) {
	var out []Entry
	_, err := readLog(ctx, q, log, func(t logType, seq int64, kind, ts string, body []byte) error {
		en, err := decodeRow(t, log, seq, kind, ts, body)
		if err != nil {
			return err
		}
		out = append(out, en)
		return nil
	})
	return out, err
}

type scanner interface{ Scan(dest ...any) error }

func scanPair(sc scanner) (PairSummary, error) {
	var p PairSummary
	var workers, status string
	var started, ended sql.NullString
	if err := sc.Scan(&p.ID, &p.PlanID, &workers, &started, &ended, &status, &p.Reason); err != nil {
		return PairSummary{}, err
	}
	p.Status = Status(status)
	_ = json.Unmarshal([]byte(workers), &p.Workers)
	p.Started, p.Ended = parseTime(started), parseTime(ended)
	return p, nil
}

func queryRuns(ctx context.Context, q querier, query string, args ...any) ([]RunSummary, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []RunSummary
	for rows.Next() {
		var r RunSummary
		var status string
		var started, ended sql.NullString
		if err := rows.Scan(&r.ID, &r.PairID, &r.Worker, &status, &r.ProblemCode, &r.ProblemMessage,
			&r.PlanID, &r.Definition, &r.Model, &started, &ended, &r.Turns, &r.InputTokens, &r.OutputTokens); err != nil {
			return nil, err
		}
		r.Status = Status(status)
		r.Started, r.Ended = parseTime(started), parseTime(ended)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()
	for i := range out {
		if r := &out[i]; r.Ended.IsZero() {
			if r.Turns, r.InputTokens, r.OutputTokens, err = recordedUsage(ctx, q, r.ID); err != nil {
				return nil, err
			}
		}
	}
	return out, nil
}

// recordedUsage counts what a run without a terminal recorded: its turns
// and the tokens of its completed model operations, from its own log or
// from a pair timeline that relayed it, whichever recorded more (a
// process can end between the two).
func recordedUsage(ctx context.Context, q querier, runID string) (turns int, in, out int64, err error) {
	var ownTurns, relayedTurns int
	var ownIn, ownOut, relayedIn, relayedOut int64
	if err = q.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE kind = 'turn.started'),
		COALESCE(sum(json_extract(body, '$.payload.input_tokens')) FILTER (WHERE kind = 'model.completed'), 0),
		COALESCE(sum(json_extract(body, '$.payload.output_tokens')) FILTER (WHERE kind = 'model.completed'), 0)
		FROM events WHERE log = ?`, runID).Scan(&ownTurns, &ownIn, &ownOut); err != nil {
		return 0, 0, 0, err
	}
	if err = q.QueryRowContext(ctx, `SELECT count(*) FILTER (WHERE e.kind = 'turn.started'),
		COALESCE(sum(json_extract(e.body, '$.payload.payload.input_tokens')) FILTER (WHERE e.kind = 'model.completed'), 0),
		COALESCE(sum(json_extract(e.body, '$.payload.payload.output_tokens')) FILTER (WHERE e.kind = 'model.completed'), 0)
		FROM pair_runs pr JOIN events e ON e.log = pr.pair_id
		WHERE pr.run_id = ? AND e.seq >= pr.first_seq AND json_extract(e.body, '$.payload.run_id') = pr.run_id`,
		runID).Scan(&relayedTurns, &relayedIn, &relayedOut); err != nil {
		return 0, 0, 0, err
	}
	return max(ownTurns, relayedTurns), max(ownIn, relayedIn), max(ownOut, relayedOut), nil
}

// queryCalls reads calls matching a WHERE clause, by start sequence.
func queryCalls(ctx context.Context, q querier, where string, args ...any) ([]Call, error) {
	rows, err := q.QueryContext(ctx, `SELECT c.run_id, c.operation_id, c.call_id, c.name, c.effect, c.replay,
		c.started_seq, COALESCE(c.ended_seq, 0), `+callStatusSQL+`, c.outcome FROM calls c `+where+` ORDER BY c.run_id, c.started_seq`, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Call
	for rows.Next() {
		var c Call
		var status string
		var started, ended int64
		if err := rows.Scan(&c.RunID, &c.OperationID, &c.CallID, &c.Name, &c.Effect, &c.Replay,
			&started, &ended, &status, &c.Outcome); err != nil {
			return nil, err
		}
		c.StartedSeq, c.EndedSeq, c.Status = uint64(max(started, 0)), uint64(max(ended, 0)), CallStatus(status)
		out = append(out, c)
	}
	return out, rows.Err()
}

func parseTime(s sql.NullString) time.Time {
	if !s.Valid {
		return time.Time{}
	}
	t, err := time.Parse(eventlog.TimeLayout, s.String)
	if err != nil {
		return time.Time{}
	}
	return t
}
