package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"slices"
)

var (
	// ErrClaimed is returned by ClaimPair for a pair that a live open
	// records: its process is still playing it, or already resuming it.
	ErrClaimed = errors.New("store: the pair is recorded by a live process")
	// ErrEnded is returned by ClaimPair for a pair with a terminal.
	ErrEnded = errors.New("store: the pair has ended")
)

// ClaimPair makes this open the owner of an interrupted pair's timeline,
// for a host that continues the pair: from now on the pair shows running
// while this open lives, and interrupted again if it goes without a
// terminal. Owners are checked in the claim's own write transaction, so
// of two opens that claim one pair at once, one gets ErrClaimed. It never
// changes a recorded event.
func (s *Store) ClaimPair(ctx context.Context, pairID string) (err error) {
	s.mu.RLock()
	closed, o := s.closed, s.owner
	s.mu.RUnlock()
	if closed {
		return ErrClosed
	}
	if o == nil {
		return ErrReadOnly
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	liveJSON, _, err := s.liveOwners(ctx, conn)
	if err != nil {
		return err
	}
	var live []string
	if err = json.Unmarshal([]byte(liveJSON), &live); err != nil {
		return err
	}
	var owner sql.NullString
	var status string
	err = conn.QueryRowContext(ctx, `SELECT l.owner, p.status FROM logs l JOIN pairs p ON p.pair_id = l.log WHERE l.log = ?`,
		pairID).Scan(&owner, &status)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return ErrNotFound
	case err != nil:
		return err
	case status != string(StatusRunning) && status != string(StatusInterrupted):
		return ErrEnded
	case owner.Valid && slices.Contains(live, owner.String):
		return ErrClaimed
	}
	if _, err = conn.ExecContext(ctx, `UPDATE logs SET owner = ? WHERE log = ?`, o.token, pairID); err != nil {
		return err
	}
	if _, err = conn.ExecContext(ctx, `UPDATE pairs SET status = 'running' WHERE pair_id = ?`, pairID); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "COMMIT")
	return err
}
