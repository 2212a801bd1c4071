package store

import "context"

// FailWrites makes the writer's connection refuse writes from now on
// (PRAGMA query_only), the way a database that turned read-only under a
// running process does: every later commit fails inside SQLite.
func FailWrites(ctx context.Context, s *Store) error {
	_, err := s.w.conn.ExecContext(ctx, "PRAGMA query_only = ON")
	return err
}

// MaxWALBytes is the size the WAL file stays within under sustained load:
// the checkpoint threshold plus one full batch of small events, in frames.
const MaxWALBytes = 32 + (checkpointFrames+2*maxBatch)*(walFrameHeader+pageSize)
