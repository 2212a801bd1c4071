package store

import (
	"context"
	"errors"
)

// FailWrites makes the writer's connection refuse writes from now on
// (PRAGMA query_only), the way a database that turned read-only under a
// running process does: every later commit fails inside SQLite.
func FailWrites(ctx context.Context, s *Store) error {
	_, err := s.w.conn.ExecContext(ctx, "PRAGMA query_only = ON")
	return err
}

// FailCommits makes every later COMMIT of the writer fail inside SQLite
// (abs of the smallest integer overflows when the statement runs), while
// the INSERTs before it succeed: a failure at the commit itself.
func FailCommits(ctx context.Context, s *Store) error {
	st, err := s.w.conn.PrepareContext(ctx, "SELECT abs(-9223372036854775807 - 1)")
	if err != nil {
		return err
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	s.w.st.commit.Close()
	s.w.st.commit = st
	return nil
}

// MaxWALBytes is the size the WAL file stays within under sustained load:
// the checkpoint threshold plus one full batch of small events, in frames.
const MaxWALBytes = 32 + (checkpointFrames+2*maxBatch)*(walFrameHeader+pageSize)

// SetHooks sets the writer's test hooks for the stores opened next: queued
// runs after a request was queued, taken when the writer's goroutine has
// taken one from the queue. The returned func clears them; call it once
// those stores are closed.
func SetHooks(queued, taken func()) (clear func()) {
	testHookQueued, testHookTaken = queued, taken
	return func() { testHookQueued, testHookTaken = nil, nil }
}

// SetCheckpointHook sets the hook the writer's goroutine runs when it is
// asked for a checkpoint, before it takes the writer's lock, for the stores
// opened next. The returned func clears it; call it once those stores are
// closed.
func SetCheckpointHook(asked func()) (clear func()) {
	testHookCheckpoint = asked
	return func() { testHookCheckpoint = nil }
}

// CloseReadingBusyTimeout closes s as Close does, and reads busy_timeout
// from the connection the pool hands out once the writer has stopped: the
// writer's, returned to the pool last, which Close's release then uses.
func CloseReadingBusyTimeout(ctx context.Context, s *Store) (ms int, err error) {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	err = s.w.stop()
	if qerr := s.db.QueryRowContext(ctx, "PRAGMA busy_timeout").Scan(&ms); err == nil {
		err = qerr
	}
	s.release()
	return ms, errors.Join(err, s.db.Close())
}
