package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"slices"
)

// Recovery is what a writable Open found that an earlier process left
// unfinished, and marked: runs and pairs without a terminal event whose
// owner is gone (owner.go) are interrupted; tool calls of such runs that
// started without a terminal are uncertain when the tool is mutating (its
// effect may or may not have happened, so nothing may run it again
// automatically) and interrupted otherwise. What a live owner is still
// recording is left as it is.
type Recovery struct {
	Pairs     []string // interrupted pair IDs, sorted
	Runs      []string // interrupted run IDs, sorted
	Uncertain []Call   // mutating calls that started without a terminal
}

// IsZero reports whether nothing was found.
func (r Recovery) IsZero() bool {
	return len(r.Pairs) == 0 && len(r.Runs) == 0 && len(r.Uncertain) == 0
}

func (r Recovery) clone() Recovery {
	return Recovery{Pairs: slices.Clone(r.Pairs), Runs: slices.Clone(r.Runs), Uncertain: slices.Clone(r.Uncertain)}
}

// recoverOpen marks what has no terminal and whose owner is gone, in one
// transaction, and reports it. The owners are checked inside the
// transaction, whose write lock keeps a new owner from committing its row
// meanwhile; the rows of the owners found gone are removed with their
// lock files.
func (s *Store) recoverOpen(ctx context.Context, conn *sql.Conn) (rec Recovery, err error) {
	if _, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return Recovery{}, err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	live, gone, err := s.liveOwners(ctx, conn)
	if err != nil {
		return Recovery{}, err
	}
	arg := sql.Named("live", live)
	if rec.Pairs, err = ids(ctx, conn, `SELECT p.pair_id FROM pairs p WHERE `+pairInterrupted+` ORDER BY p.pair_id`, arg); err != nil {
		return Recovery{}, err
	}
	if rec.Runs, err = ids(ctx, conn, `SELECT r.run_id FROM runs r WHERE `+runInterrupted+` ORDER BY r.run_id`, arg); err != nil {
		return Recovery{}, err
	}
	if rec.Uncertain, err = queryCalls(ctx, conn, `WHERE `+callUnended+` AND c.effect = 'mutating'`, arg); err != nil {
		return Recovery{}, err
	}
	for _, q := range []string{
		`UPDATE pairs AS p SET status = 'interrupted' WHERE ` + pairInterrupted,
		`UPDATE runs AS r SET status = 'interrupted' WHERE ` + runInterrupted,
		`UPDATE calls AS c SET status = CASE WHEN c.effect = 'mutating' THEN 'uncertain' ELSE 'interrupted' END WHERE ` + callUnended,
	} {
		if _, err = conn.ExecContext(ctx, q, arg); err != nil {
			return Recovery{}, err
		}
	}
	for _, token := range gone {
		if _, err = conn.ExecContext(ctx, `DELETE FROM owners WHERE owner = ?`, token); err != nil {
			return Recovery{}, err
		}
	}
	if _, err = conn.ExecContext(ctx, "COMMIT"); err != nil {
		return Recovery{}, err
	}
	for _, token := range gone {
		_ = os.Remove(filepath.Join(s.ownerDir, token+".lock"))
	}
	return rec, nil
}

// What recovery marks: the rows whose effective status (owner.go) differs
// from the recorded one.
var (
	pairInterrupted = `p.status = 'running' AND NOT ` + fmt.Sprintf(pairOwnerLive, "p.pair_id")
	runInterrupted  = `r.status = 'running' AND NOT ` + fmt.Sprintf(runOwnerLive, "r.run_id")
	callUnended     = `c.status = 'started' AND NOT ` + fmt.Sprintf(runOwnerLive, "c.run_id")
)

func ids(ctx context.Context, q querier, query string, args ...any) ([]string, error) {
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}
