package store

import (
	"context"
	"database/sql"
	"slices"
)

// Recovery is what a writable Open found that an earlier process left
// unfinished, and marked: runs and pairs without a terminal event are
// interrupted; tool calls that started without a terminal are uncertain
// when the tool is mutating (its effect may or may not have happened, so
// nothing may run it again automatically) and interrupted otherwise.
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

// recoverOpen marks what has no terminal, in one transaction, and reports
// it.
func recoverOpen(ctx context.Context, conn *sql.Conn) (rec Recovery, err error) {
	if _, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return Recovery{}, err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	if rec.Pairs, err = ids(ctx, conn, `SELECT pair_id FROM pairs WHERE status = 'running' ORDER BY pair_id`); err != nil {
		return Recovery{}, err
	}
	if rec.Runs, err = ids(ctx, conn, `SELECT run_id FROM runs WHERE status = 'running' ORDER BY run_id`); err != nil {
		return Recovery{}, err
	}
	if rec.Uncertain, err = queryCalls(ctx, conn, `WHERE status = 'started' AND effect = 'mutating'`); err != nil {
		return Recovery{}, err
	}
	for i := range rec.Uncertain {
		rec.Uncertain[i].Status = CallUncertain
	}
	for _, q := range []string{
		`UPDATE pairs SET status = 'interrupted' WHERE status = 'running'`,
		`UPDATE runs SET status = 'interrupted' WHERE status = 'running'`,
		`UPDATE calls SET status = 'uncertain' WHERE status = 'started' AND effect = 'mutating'`,
		`UPDATE calls SET status = 'interrupted' WHERE status = 'started'`,
	} {
		if _, err = conn.ExecContext(ctx, q); err != nil {
			return Recovery{}, err
		}
	}
	if _, err = conn.ExecContext(ctx, "COMMIT"); err != nil {
		return Recovery{}, err
	}
	return rec, nil
}

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
