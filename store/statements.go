package store

import (
	"context"
	"database/sql"
)

// statements are the writer's statements, prepared once on its connection.
type statements struct {
	begin, commit, rollback *sql.Stmt

	insertEvent, selectBody *sql.Stmt
	insertLog, selectLog    *sql.Stmt

	runStarted, runEnded   *sql.Stmt
	callStarted, callEnded *sql.Stmt
	pairStarted, pairEnded *sql.Stmt
	pairRun                *sql.Stmt
}

func (st *statements) prepare(ctx context.Context, conn *sql.Conn) error {
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		// IMMEDIATE takes the write lock at once, so a busy database is
		// waited for (busy_timeout) at the start, not in the middle.
		{&st.begin, `BEGIN IMMEDIATE`},
		{&st.commit, `COMMIT`},
		{&st.rollback, `ROLLBACK`},
		{&st.insertEvent, `INSERT INTO events (log, seq, kind, time, body) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (log, seq) DO NOTHING`},
		{&st.selectBody, `SELECT body FROM events WHERE log = ? AND seq = ?`},
		{&st.insertLog, `INSERT INTO logs (log, type) VALUES (?, ?) ON CONFLICT (log) DO NOTHING`},
		{&st.selectLog, `SELECT type FROM logs WHERE log = ?`},
		{&st.runStarted, `INSERT INTO runs (run_id, plan_id, definition, model, started_at, status)
			VALUES (?, ?, ?, ?, ?, 'running')
			ON CONFLICT (run_id) DO UPDATE SET plan_id = excluded.plan_id,
				definition = excluded.definition, model = excluded.model,
				started_at = excluded.started_at`},
		{&st.runEnded, `INSERT INTO runs (run_id, ended_at, status, problem_code, problem_message,
				turns, input_tokens, output_tokens)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (run_id) DO UPDATE SET ended_at = excluded.ended_at,
				status = excluded.status, problem_code = excluded.problem_code,
				problem_message = excluded.problem_message, turns = excluded.turns,
				input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens`},
		{&st.callStarted, `INSERT INTO calls (run_id, operation_id, call_id, name, effect, replay,
				started_seq, status)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'started')
			ON CONFLICT (run_id, operation_id) DO NOTHING`},
		{&st.callEnded, `UPDATE calls SET status = ?, outcome = ?, ended_seq = ?
			WHERE run_id = ? AND operation_id = ?`},
		{&st.pairStarted, `INSERT INTO pairs (pair_id, plan_id, workers, started_at, status)
			VALUES (?, ?, ?, ?, 'running')
			ON CONFLICT (pair_id) DO UPDATE SET plan_id = excluded.plan_id,
				workers = excluded.workers, started_at = excluded.started_at`},
		{&st.pairEnded, `INSERT INTO pairs (pair_id, ended_at, status, reason) VALUES (?, ?, ?, ?)
			ON CONFLICT (pair_id) DO UPDATE SET ended_at = excluded.ended_at,
				status = excluded.status, reason = excluded.reason`},
		{&st.pairRun, `INSERT INTO pair_runs (pair_id, run_id, worker, first_seq) VALUES (?, ?, ?, ?)
			ON CONFLICT (pair_id, run_id) DO NOTHING`},
	} {
		s, err := conn.PrepareContext(ctx, p.sql)
		if err != nil {
			return err
		}
		*p.dst = s
	}
	return nil
}

func (st *statements) close() {
	for _, s := range []*sql.Stmt{st.begin, st.commit, st.rollback, st.insertEvent, st.selectBody,
		st.insertLog, st.selectLog, st.runStarted, st.runEnded, st.callStarted, st.callEnded,
		st.pairStarted, st.pairEnded, st.pairRun} {
		if s != nil {
			s.Close()
		}
	}
}
