package scheduler

import (
	"context"
	"testing"

	"github.com/hashicorp/go-memdb"

	"github.com/spice-orch/spice-orch/orchestrator"
)

// BenchmarkTableJob measures the table work of one job without its pair:
// a submission, its start and its end, behind a backlog of 64 queued jobs
// and with 64 finished jobs kept, as in BenchmarkSchedulerThroughput.
func BenchmarkTableJob(b *testing.B) {
	prefix := randomPrefix()
	cfg := Config{Pairs: 1, Queue: 1 << 20, Retain: 64, IDs: Sequential(prefix)}
	if err := cfg.normalize(); err != nil {
		b.Fatal(err)
	}
	db, err := memdb.NewMemDB(newSchema(false))
	if err != nil {
		b.Fatal(err)
	}
	s := &Scheduler{cfg: cfg, ownIDs: true, idPrefix: prefix, db: db, starts: make(map[string]*record), ends: make(map[string]*record), waits: make(map[string]chan struct{}), storing: make(map[string]*record), unstoredIDs: make(map[string]*record)}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	defer s.cancelBase()
	pair := &orchestrator.Config{}
	submit := func() {
		s.mu.Lock()
		s.seq++
		s.pending = append(s.pending, &record{id: s.cfg.IDs(s.seq), seq: s.seq, state: Queued, submitted: s.now(), cfg: pair})
		s.unsynced.Add(1)
		s.counts.queued.Add(1)
		s.mu.Unlock()
	}
	for range 64 {
		submit()
	}
	jc := &jobCtx{base: s.base}
	var ended *record
	b.ReportAllocs()
	for b.Loop() {
		submit()
		r, _ := s.step(ended, jc)
		r.run.cancel()
		ended = &record{id: r.id, seq: r.seq, state: Completed, submitted: r.submitted, run: r.run,
			end: &ending{at: s.now()}}
	}
}
