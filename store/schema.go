package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SchemaVersion is the schema this build reads and writes. It is kept in
// PRAGMA user_version; PRAGMA application_id marks the file as a store.
const SchemaVersion = 2

// applicationID is "SPOR" as a big-endian 32-bit integer.
const applicationID = 0x53504F52

// migrations[v] moves a database from version v to v+1. A migration only
// adds; the events table, whose rows are the record itself, never changes
// its existing rows.
var migrations = []string{
	0: `
CREATE TABLE logs (
	log  TEXT PRIMARY KEY,
	type TEXT NOT NULL CHECK (type IN ('run', 'pair', 'other'))
) WITHOUT ROWID;

CREATE TABLE events (
	log  TEXT    NOT NULL,
	seq  INTEGER NOT NULL CHECK (seq >= 1),
	kind TEXT    NOT NULL,
	time TEXT    NOT NULL,
	body BLOB    NOT NULL CHECK (length(body) BETWEEN 1 AND 2097152),
	PRIMARY KEY (log, seq)
);

CREATE TABLE runs (
	run_id          TEXT PRIMARY KEY,
	plan_id         TEXT    NOT NULL DEFAULT '',
	definition      TEXT    NOT NULL DEFAULT '',
	model           TEXT    NOT NULL DEFAULT '',
	started_at      TEXT,
	ended_at        TEXT,
	status          TEXT    NOT NULL,
	problem_code    TEXT    NOT NULL DEFAULT '',
	problem_message TEXT    NOT NULL DEFAULT '',
	turns           INTEGER NOT NULL DEFAULT 0,
	input_tokens    INTEGER NOT NULL DEFAULT 0,
	output_tokens   INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
CREATE INDEX runs_status ON runs (status);

CREATE TABLE pairs (
	pair_id    TEXT PRIMARY KEY,
	plan_id    TEXT NOT NULL DEFAULT '',
	workers    TEXT NOT NULL DEFAULT '[]',
	started_at TEXT,
	ended_at   TEXT,
	status     TEXT NOT NULL,
	reason     TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;
CREATE INDEX pairs_status ON pairs (status);
CREATE INDEX pairs_started ON pairs (started_at);

CREATE TABLE pair_runs (
	pair_id   TEXT    NOT NULL,
	run_id    TEXT    NOT NULL,
	worker    TEXT    NOT NULL DEFAULT '',
	first_seq INTEGER NOT NULL,
	PRIMARY KEY (pair_id, run_id)
) WITHOUT ROWID;
CREATE INDEX pair_runs_run ON pair_runs (run_id);

CREATE TABLE calls (
	run_id       TEXT    NOT NULL,
	operation_id TEXT    NOT NULL,
	call_id      TEXT    NOT NULL,
	name         TEXT    NOT NULL,
	effect       TEXT    NOT NULL DEFAULT '',
	replay       TEXT    NOT NULL DEFAULT '',
	started_seq  INTEGER NOT NULL,
	ended_seq    INTEGER,
	status       TEXT    NOT NULL,
	outcome      TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, operation_id)
) WITHOUT ROWID;
CREATE INDEX calls_status ON calls (status);
`,
	// Owners (owner.go): every writable open, and the open that wrote each
	// log's first event.
	1: `
CREATE TABLE owners (
	owner     TEXT PRIMARY KEY,
	pid       INTEGER NOT NULL,
	host      TEXT NOT NULL DEFAULT '',
	opened_at TEXT NOT NULL
) WITHOUT ROWID;
ALTER TABLE logs ADD COLUMN owner TEXT;
`,
}

// header reads the file's application ID, schema version and whether it
// holds any schema object.
func header(ctx context.Context, q querier) (app, version int, empty bool, err error) {
	if err = q.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return 0, 0, false, err
	}
	if err = q.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version); err != nil {
		return 0, 0, false, err
	}
	var n int
	if err = q.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master").Scan(&n); err != nil {
		return 0, 0, false, err
	}
	return app, version, n == 0, nil
}

// checkHeader accepts a store at exactly SchemaVersion, or (when migrate is
// set) an empty file or a store at an older version.
func checkHeader(app, version int, empty, migrate bool) error {
	switch {
	case app == 0 && version == 0 && empty:
		if migrate {
			return nil
		}
		return ErrNotStore
	case app != applicationID:
		return ErrNotStore
	case version < 0, version > 0 && empty, version == 0 && !empty:
		// No build writes a negative version, every version above zero
		// has tables, and a file with tables has a version above zero:
		// the header was overwritten.
		return fmt.Errorf("%w: schema version %d is not one any build writes", ErrDamaged, version)
	case version > SchemaVersion, version < SchemaVersion && !migrate:
		return &VersionError{Found: version, Supported: SchemaVersion}
	}
	return nil
}

// migrate brings the database on conn to SchemaVersion in one immediate
// transaction, so that two processes opening a new file at once cannot both
// create it.
func migrate(ctx context.Context, conn *sql.Conn) (err error) {
	if _, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	app, version, empty, err := header(ctx, conn)
	if err != nil {
		return err
	}
	if err = checkHeader(app, version, empty, true); err != nil {
		return err
	}
	for v := version; v < SchemaVersion; v++ {
		if _, err = conn.ExecContext(ctx, migrations[v]); err != nil {
			err = fmt.Errorf("store: migrating to schema version %d: %w", v+1, err)
			var se interface{ Code() int }
			if errors.As(err, &se) && se.Code()&0xff == sqliteError {
				// The tables are not those of the version the header
				// names.
				err = fmt.Errorf("%w: %w", ErrDamaged, err)
			}
			return err
		}
	}
	if version < SchemaVersion {
		if _, err = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", applicationID)); err != nil {
			return err
		}
		if _, err = conn.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", SchemaVersion)); err != nil {
			return err
		}
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}

// querier is what *sql.DB, *sql.Conn and *sql.Tx share.
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}
