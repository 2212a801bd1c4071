package store

import (
	"context"
	"database/sql"
	"strconv"
)

// Checkpoint policy. SQLite's automatic checkpoint runs inside the commit
// that crosses its threshold, so the events of that commit wait for two
// more syncs (the WAL's and the database's) before they are acknowledged.
// The writer turns it off and checkpoints itself, between batches, after
// the batch's callers are answered. Because nothing writes while it runs,
// a checkpoint that no reader holds back copies the whole WAL, and the
// next transaction starts the WAL again from its beginning: the file stays
// at about checkpointFrames pages under any sustained load.
const (
	// checkpointFrames is how many WAL frames (pages) the writer lets
	// accumulate before it checkpoints: 16 MiB of 1 KiB pages. A
	// checkpoint copies each page once however often the WAL holds it,
	// and events of many logs rewrite the same leaves of the events
	// index, so a larger WAL copies fewer pages per event: with a
	// thousand logs appending at once (five hundred streaming pairs), a
	// 16 MiB WAL costs the writer about a tenth less per event than a
	// 4 MiB one, and its checkpoints sync a quarter as often.
	checkpointFrames = 16000
	// restartFrames is the bound a passive checkpoint that readers held
	// back may let the WAL grow to; past it the writer checkpoints with
	// RESTART, which waits for those readers (busy_timeout bounds the
	// wait) and then lets the next transaction reuse the file.
	restartFrames = 2 * checkpointFrames
	// walLimit is journal_size_limit: a WAL that one large batch grew
	// beyond it is truncated back to it when it next restarts.
	walLimit = 2 * checkpointFrames * (pageSize + walFrameHeader)

	walFrameHeader = 24
)

// checkpointer decides when the writer checkpoints. It estimates the WAL's
// growth from the events and bytes committed and learns the exact size
// from each checkpoint's answer.
type checkpointer struct {
	pending int // frames estimated to be in the WAL since it last restarted
	next    int // pending at which to checkpoint next
}

func (c *checkpointer) init(ctx context.Context, conn *sql.Conn) error {
	for _, q := range []string{
		"PRAGMA wal_autocheckpoint = 0",
		"PRAGMA journal_size_limit = " + strconv.Itoa(walLimit),
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	c.next = checkpointFrames
	return nil
}

// add is told of a committed batch of events whose rows hold size bytes,
// and estimates from above the WAL frames (pages) it added: each event's
// key lands on its own log's leaf of the events index, the rows fill table
// leaves (at least three quarters full, as SQLite splits a leaf it appends
// to) and rewrite the last one, and a commit rewrites up to four pages
// more: the file header when the file grows, and the interior pages above
// a leaf that split (two levels of the table, one of the index). Once
// the trees are deeper, a batch of many logs splits leaves under more
// interior pages than that: a quarter more covers it (64 logs of 850-byte
// rows wrote 8 % more frames than the sum).
func (c *checkpointer) add(events, size int) {
	n := events + (size+leafFill-1)/leafFill + 1 + 4
	c.pending += n + (n+3)/4
}

const leafFill = pageSize * 3 / 4

// due reports whether the WAL has grown past the policy's threshold.
func (c *checkpointer) due() bool { return c.pending >= c.next }

// checkpoint runs the checkpoint the policy asks for. A failed checkpoint
// loses nothing (the events are in the WAL, and SQLite checkpoints a WAL it
// finds at the next open); it is tried again once the WAL has grown by
// another threshold.
func (w *writer) checkpoint() {
	c := &w.policy
	ctx := context.Background()
	mode := "PASSIVE"
	if c.pending >= restartFrames {
		mode = "RESTART"
	}
	var busy, log, done int
	err := w.conn.QueryRowContext(ctx, "PRAGMA wal_checkpoint("+mode+")").Scan(&busy, &log, &done)
	switch {
	case err == nil && busy == 0 && done == log:
		c.pending = 0 // the next transaction restarts the WAL
		c.next = checkpointFrames
	case err == nil && log >= 0:
		// Readers held part of the WAL back: try again once it has grown
		// by another threshold, so that a long read does not turn every
		// batch into a checkpoint.
		c.pending = log
		c.next = log + checkpointFrames
	default:
		c.next = c.pending + checkpointFrames
	}
}
