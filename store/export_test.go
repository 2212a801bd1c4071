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

// CheckpointFrames is the WAL's size in frames at which the writer
// checkpoints.
const CheckpointFrames = checkpointFrames

// Hooks are test hooks of one store's writer: Queued runs after a request
// was queued, on the caller's goroutine; Commit runs inside every
// transaction, just before its COMMIT, on the writer's goroutine. Either
// may be nil.
type Hooks struct {
	Queued, Commit func()
}

// OpenWithHooks opens a writable store at path, as Open does, whose writer
// runs h. The hooks are in place before the writer's goroutine starts and
// belong to this store only, so tests that use them may run in parallel.
func OpenWithHooks(ctx context.Context, path string, h Hooks) (*Store, error) {
	return openConfig(ctx, Config{Path: path}, hooks{queued: h.Queued, commit: h.Commit})
}

// OwnRows is how many rows of the events table are keyed by log.
func OwnRows(ctx context.Context, s *Store, log string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM events WHERE log = ?`, log).Scan(&n)
	return n, err
}
