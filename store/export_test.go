package store

import "context"

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
	s.w.st.commit.Close()
	s.w.st.commit = st // the writer reads it after the next event is queued
	return nil
}

// MaxWALBytes is the size the WAL file stays within under sustained load:
// the checkpoint threshold plus one full batch of small events, in frames.
const MaxWALBytes = 32 + (checkpointFrames+2*maxBatch)*(walFrameHeader+pageSize)

// SetHooks sets the writer's test hooks for the stores opened next: queued
// runs after a request was queued, committing inside every transaction,
// just before its COMMIT, on the writer's goroutine. The returned func
// clears them; call it once those stores are closed.
func SetHooks(queued, committing func()) (clear func()) {
	testHookQueued, testHookCommit = queued, committing
	return func() { testHookQueued, testHookCommit = nil, nil }
}
