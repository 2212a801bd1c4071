package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// Owners. Every writable open is an owner: it has a row in the owners
// table and holds a lock on a file of its own, <store>-owners/<token>.lock,
// for as long as it is open. The operating system releases that lock when
// the process ends, however it ends (SIGKILL included), so "is the owner
// alive" is "is its lock still held", without process IDs that can be
// reused. Each log is stamped, at its first event, with the owner that
// wrote it; a run or pair without a terminal is interrupted only when its
// owner is gone, so a process that opens the store while another one is
// still recording a pair leaves that pair running.
//
// The stamp is a TEMP trigger on the writer's own connection: the event
// write path is unchanged, and only a log's first event pays for it.

// ownerDir is the directory of a store's owner lock files, beside the
// store's file under its resolved name, as SQLite resolves it: every open
// of one file, by whatever name (a symlink, a relative path), finds the
// same owners.
func ownerDir(path string) string { return resolved(path) + "-owners" }

// resolved is path absolute and without symlinks, as far as it exists.
func resolved(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return path
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	// A store not created yet: its directory may exist.
	if r, err := filepath.EvalSymlinks(filepath.Dir(abs)); err == nil {
		return filepath.Join(r, filepath.Base(abs))
	}
	return abs
}

// owner is this open's registration.
type owner struct {
	token string
	dir   string
	lock  *os.File // holds the exclusive lock; nil when locks are not supported
}

// register makes this open an owner: it takes the lock first and then
// commits the row, so that a row another process can see always has its
// lock held.
func (s *Store) register(ctx context.Context, conn *sql.Conn, path string) error {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	o := &owner{token: hex.EncodeToString(b[:]), dir: s.ownerDir}
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return fmt.Errorf("store: owner lock: %w", err)
	}
	f, err := lockOwner(filepath.Join(o.dir, o.token+".lock"))
	if err != nil {
		return fmt.Errorf("store: owner lock: %w", err)
	}
	o.lock = f
	s.owner = o
	host, _ := os.Hostname()
	if _, err := conn.ExecContext(ctx, `INSERT INTO owners (owner, pid, host, opened_at) VALUES (?, ?, ?, ?)`,
		o.token, os.Getpid(), host, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return err
	}
	// The token is hex: it needs no quoting beyond the literal's.
	_, err = conn.ExecContext(ctx, `CREATE TEMP TRIGGER owner_stamp AFTER INSERT ON main.logs FOR EACH ROW
		BEGIN UPDATE main.logs SET owner = '`+o.token+`' WHERE log = NEW.log; END`)
	return err
}

// release ends this open's ownership: the row goes (best effort: an owner
// whose row stays behind is found gone by its free lock) and the lock is
// released.
func (s *Store) release() {
	o := s.owner
	if o == nil {
		return
	}
	s.owner = nil
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, _ = s.db.ExecContext(ctx, `DELETE FROM owners WHERE owner = ?`, o.token)
	if o.lock != nil {
		_ = os.Remove(o.lock.Name())
		_ = o.lock.Close()
	}
}

// liveOwners returns the tokens of the owners whose lock is held, as the
// JSON array the queries take (SQL parameter :live). An owner this process
// cannot check (its lock file unreadable) counts as alive: nothing is
// called interrupted that might not be.
func (s *Store) liveOwners(ctx context.Context, q querier) (string, []string, error) {
	rows, err := q.QueryContext(ctx, `SELECT owner FROM owners ORDER BY owner`)
	if err != nil {
		return "", nil, err
	}
	defer rows.Close()
	var live, gone []string
	for rows.Next() {
		var token string
		if err := rows.Scan(&token); err != nil {
			return "", nil, err
		}
		if s.owner != nil && token == s.owner.token || ownerAlive(filepath.Join(s.ownerDir, token+".lock")) {
			live = append(live, token)
		} else {
			gone = append(gone, token)
		}
	}
	if err := rows.Err(); err != nil {
		return "", nil, err
	}
	b, err := json.Marshal(nonNil(live))
	return string(b), gone, err
}

// SQL for the owner of a pair, a run and a call's run, and whether it is
// among the live ones (:live, from liveOwners). A log recorded before
// owners were (schema version 1) has none, and so has a gone owner.
const (
	pairOwnerLive = `EXISTS (SELECT 1 FROM logs ol WHERE ol.log = %[1]s AND ol.owner IN (SELECT value FROM json_each(:live)))`
	runOwnerLive  = `(EXISTS (SELECT 1 FROM logs ol WHERE ol.log = %[1]s AND ol.owner IN (SELECT value FROM json_each(:live)))
		OR EXISTS (SELECT 1 FROM pair_runs opr JOIN logs ol ON ol.log = opr.pair_id
			WHERE opr.run_id = %[1]s AND ol.owner IN (SELECT value FROM json_each(:live))))`
)

// Effective statuses: what was recorded, except that a run or pair
// without a terminal whose owner is gone is interrupted, and a call that
// started without a terminal in such a run is uncertain (mutating) or
// interrupted. Every read uses them, so a read-only open, or one whose
// recovery could not write, shows the same as a recovered store.
var (
	pairStatusSQL = `CASE WHEN ` + pairInterrupted + ` THEN 'interrupted' ELSE p.status END`
	runStatusSQL  = `CASE WHEN ` + runInterrupted + ` THEN 'interrupted' ELSE r.status END`
	callStatusSQL = `CASE WHEN ` + callUnended + ` THEN CASE WHEN c.effect = 'mutating' THEN 'uncertain' ELSE 'interrupted' END ELSE c.status END`
)
