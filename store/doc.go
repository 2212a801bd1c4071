// Package store is the durable record of runs and pairs: a required
// observer (K16, K17) that writes every event it is told about to a local
// SQLite database (modernc.org/sqlite, pure Go) and acknowledges the event
// only once the row is on stable storage, and the read side a command line
// needs to list, show and replay what was recorded.
//
// It owns the database schema and its migrations, the events table (one row
// per event: log, sequence, kind, time and the event's canonical JSON bytes,
// exactly what the live JSON stream printed; a run told to the store only
// through its pair's timeline is read back out of the pair's relayed rows,
// byte for byte, so that it costs one row an event), the tables derived
// from the events (runs, pairs, the runs of each pair, tool calls), write
// integrity (a used sequence never changes its bytes), and recovery after
// a crash: a run or pair without a terminal event whose owner (the
// writable open that recorded it, held alive by an OS-released file lock)
// is gone is interrupted, and a mutating tool call that started without a
// terminal in it is uncertain and never run again by anything that trusts
// this record.
//
// Durability: the database is in WAL mode with synchronous=FULL, so a
// transaction's commit syncs the write-ahead log before it returns. Observe
// returns nil only after the commit that holds its event returned.
// Concurrent events of different logs share one commit (group commit),
// which changes nothing about when each is acknowledged. Only the
// writer's goroutine commits, so that a caller whose ctx ends stops waiting
// whatever the commit is doing (a stalled sync included); the event stays
// queued ahead of its log's next one. The writer checkpoints the WAL
// itself, between commits and after their callers are answered, which
// keeps the file near a fixed size under sustained load and keeps
// checkpoint syncs out of every acknowledgement; a new store has 1 KiB
// pages, so that a commit of events of many logs writes and syncs little
// more than their rows.
//
// It knows the kernel's run event kinds (kernel/event) and reads a pair
// timeline only as generic JSON by kind name ("pair.started", relayed run
// events carrying worker, run_id, run_seq and payload). Those names are
// the pair timeline schema defined in orchestrator's schema.go (KindPrefix,
// the Kind* constants, the Field* names); store spells them itself in
// pairjson.go because it must not import the code that writes pair
// timelines, and a test in cmd/spice-orch/internal/compose checks that the
// two agree. It must not import orchestrator, any provider or tool, or
// anything that runs pairs. It never re-runs a tool or decides what to
// resume; it records and reports.
package store
