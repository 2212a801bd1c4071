package scheduler

import (
	"errors"
	"math/bits"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/spice-orch/spice-orch/orchestrator"
)

// record is a job's row in the table. A stored record is never changed: a
// transition stores a changed copy.
type record struct {
	id        string
	seq       uint64
	state     State
	submitted time.Time
	cfg       *orchestrator.Config // until the job leaves the queue
	run       *run                 // from the job's start
	end       *ending              // once it has ended
	// The record's index keys, made once and handed on to the job's
	// later records: only write transactions, under the table's write
	// lock, read or set them. idKey only with Config.IDs.
	key, idKey []byte
}

// ending is what a finished job keeps.
type ending struct {
	at     time.Time
	result orchestrator.Result
	err    error
}

// A record and the part its transition adds are allocated together:
// a job makes three records, and these halve their allocations.
type (
	startedRecord struct {
		record
		rn run
	}
	endedRecord struct {
		record
		ending ending
	}
)

// newStarted returns the Running record of queued job q.
func newStarted(q *record, rn run) *record {
	sr := &startedRecord{record: *q, rn: rn}
	sr.state, sr.cfg, sr.run = Running, q.cfg, &sr.rn
	return &sr.record
}

// newEnded returns r's job's terminal record: r's run, if any, and end.
// It does not read r's keys, which a transaction may be setting.
func newEnded(r *record, state State, end ending) *record {
	er := &endedRecord{record: record{id: r.id, seq: r.seq, state: state, submitted: r.submitted, run: r.run}, ending: end}
	er.end = &er.ending
	return &er.record
}

func (r *record) info() Info {
	in := Info{ID: r.id, Seq: r.seq, State: r.state, Submitted: r.submitted}
	if r.run != nil {
		in.Started = r.run.started
	}
	if r.end != nil {
		in.Ended, in.Result, in.Err = r.end.at, r.end.result, r.end.err
	}
	return in
}

// The table and its indexes. Its primary index ("id", as memdb requires)
// is keyed by submission number: it is the submission-order index. The
// queued job to start next is the first queued one after the last
// started, and List scans it, filtered by state. A job's state is in no
// key, so a transition replaces one leaf and moves no key; every write
// copies the radix nodes on its path, once per index, so one index costs
// half of two. The default IDs spell the submission number, so a job is
// found from its ID in the same index; a host's own IDs (Config.IDs) add
// an index by ID.
const (
	table    = "jobs"
	indexID  = "id"  // by submission number
	indexJob = "job" // by job ID, with Config.IDs only
)

// newSchema returns the table's schema: with byID, an index by job ID too.
func newSchema(byID bool) *memdb.DBSchema {
	ts := &memdb.TableSchema{Name: table, Indexes: map[string]*memdb.IndexSchema{
		indexID: {Name: indexID, Unique: true, Indexer: seqIndexer{}},
	}}
	if byID {
		ts.Indexes[indexJob] = &memdb.IndexSchema{Name: indexJob, Unique: true, Indexer: idIndexer{}}
	}
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{table: ts}}
}

var errIndexArg = errors.New("scheduler: wrong index argument")

// The indexers are written by hand: memdb's field indexers use
// reflection, and its integer ones encode varints, whose byte order is not
// numeric order.
//
// A submission number is keyed as its count of hexadecimal digits followed
// by the digits, one per byte: byte order is numeric order, and no radix
// tree node has more than 16 children. Every write copies the nodes on its
// path, so narrow nodes keep each transition cheap; with one byte per
// 8 bits, consecutive numbers would share nodes of 256 children.

// seqIndexer keys a record by its submission number.
type seqIndexer struct{}

func (seqIndexer) FromObject(raw any) (bool, []byte, error) {
	r := raw.(*record)
	if r.key == nil {
		r.key = appendSeq(make([]byte, 0, 17), r.seq)
	}
	return true, r.key, nil
}

func (seqIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, errIndexArg
	}
	n, ok := args[0].(uint64)
	if !ok {
		return nil, errIndexArg
	}
	return appendSeq(make([]byte, 0, 17), n), nil
}

// appendSeq appends the order-preserving key of n.
func appendSeq(dst []byte, n uint64) []byte {
	digits := max(1, (bits.Len64(n)+3)/4)
	dst = append(dst, byte(digits))
	for i := digits - 1; i >= 0; i-- {
		dst = append(dst, byte(n>>(4*i))&0xf)
	}
	return dst
}

// idIndexer keys a record by its job ID.
type idIndexer struct{}

func (idIndexer) FromObject(raw any) (bool, []byte, error) {
	r := raw.(*record)
	if r.idKey == nil {
		r.idKey = []byte(r.id)
	}
	return true, r.idKey, nil
}

func (idIndexer) FromArgs(args ...any) ([]byte, error) {
	if len(args) != 1 {
		return nil, errIndexArg
	}
	s, ok := args[0].(string)
	if !ok {
		return nil, errIndexArg
	}
	return []byte(s), nil
}

// maxPending bounds the submissions waiting for a transaction, maxEnds
// the terminal records written behind. A slot takes its next job from the
// pending ones when no stored job is queued, and such a job is never
// stored queued: the longer the buffer, the more jobs skip that write.
const (
	maxPending = 256
	maxEnds    = 64
)

// testHookDrained, set only by tests, runs after a drain's commit, before
// its jobs leave unstoredIDs.
var testHookDrained func()

// inUse reports whether a job, stored, being stored or pending, has the
// ID. The caller holds mu.
func (s *Scheduler) inUse(jobID string) bool {
	if s.unstored(jobID) || s.starts[jobID] != nil || s.ends[jobID] != nil || s.storing[jobID] != nil {
		return true
	}
	_, r := s.first(s.db.Txn(false), jobID)
	return r != nil
}

// first reads the job's stored record, if any, and a channel closed when
// the job's entry in the table changes.
func (s *Scheduler) first(txn *memdb.Txn, jobID string) (<-chan struct{}, *record) {
	var ch <-chan struct{}
	var raw any
	if s.ownIDs {
		seq, ok := s.seqOf(jobID)
		if !ok {
			return nil, nil
		}
		ch, raw, _ = txn.FirstWatch(table, indexID, seq)
	} else {
		ch, raw, _ = txn.FirstWatch(table, indexJob, jobID)
	}
	if r, ok := raw.(*record); ok && r.id == jobID {
		return ch, r
	}
	return ch, nil
}

// seqOf returns the submission number that a default ID spells:
// idPrefix, then the number in canonical decimal.
func (s *Scheduler) seqOf(jobID string) (uint64, bool) {
	digits, ok := strings.CutPrefix(jobID, s.idPrefix)
	if !ok || digits == "" || digits[0] == '0' || len(digits) > 20 {
		return 0, false
	}
	for i := range len(digits) {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(digits, 10, 64)
	return n, err == nil
}

// dropUnstored removes r from unstoredIDs unless a job has left it
// already. A drained job leaves it when its drain's deferred work runs,
// after the table is released: a job that another transaction started or
// cancelled in between leaves it then, so no read finds it queued in the
// buffer after its start or end. The caller holds mu.
func (s *Scheduler) dropUnstored(r *record) {
	if s.unstoredIDs[r.id] == r {
		delete(s.unstoredIDs, r.id)
	}
}

// unstored reports whether a job pending or being stored has the ID. The
// caller holds mu.
func (s *Scheduler) unstored(jobID string) bool {
	return s.unstoredIDs[jobID] != nil
}

// drain stores the pending submissions, oldest first, and reports
// whether the scheduler was closed when it took them: no submission can
// follow a drain that saw it closed. The caller holds the write lock.
func (s *Scheduler) drain() (closed bool) {
	s.mu.Lock()
	batch, closed := s.pending, s.closed
	if len(batch) == 0 {
		s.mu.Unlock()
		return closed
	}
	s.pending, s.spare = s.spare[:0], nil
	s.draining = batch // until the commit, for inUse
	s.moves.Add(1)
	s.mu.Unlock()
	for _, r := range batch {
		s.put(r)
	}
	s.lastQueued = batch[len(batch)-1].seq
	s.afterCommit(func() { // after the commit
		if testHookDrained != nil {
			testHookDrained()
		}
		s.unsynced.Add(-int64(len(batch)))
		s.mu.Lock()
		if len(s.draining) > 0 && &s.draining[0] == &batch[0] {
			s.draining = nil
		}
		for _, r := range batch {
			s.dropUnstored(r)
			// A Wait may have read the job from the buffer after a
			// deferred end in this commit (Cancel, Shutdown) woke its
			// waiters: it blocks on the buffer, so wake it on leaving.
			s.wakeLocked(r.id)
		}
		s.moves.Add(1)
		clear(batch)
		if s.spare == nil && cap(batch) <= maxPending {
			s.spare = batch[:0]
		}
		s.mu.Unlock()
	})
	return closed
}

// syncStarts stores the Running records written behind. The caller holds
// the write lock.
func (s *Scheduler) syncStarts() {
	s.mu.Lock()
	n := len(s.starts)
	if n == 0 {
		s.mu.Unlock()
		return
	}
	// In storing until the commit: a job a slot took from pending has
	// no stored record before this one.
	batch := make([]*record, 0, n)
	for jobID, r := range s.starts {
		s.put(r)
		batch = append(batch, r)
		s.storing[jobID] = r
		delete(s.starts, jobID)
	}
	s.mu.Unlock()
	s.afterCommit(func() {
		s.mu.Lock()
		for _, r := range batch {
			if s.storing[r.id] == r {
				delete(s.storing, r.id)
			}
		}
		s.moves.Add(1)
		s.mu.Unlock()
		s.buffered.Add(-int64(n))
	})
}

// syncEnds stores the terminal records written behind, in the order the
// jobs ended, and retires them. They stay readable in ends until the
// commit, so a read never sees a job go back from ended to running, and
// their waiters are woken after it. The caller holds the write
// lock.
func (s *Scheduler) syncEnds() {
	s.mu.Lock()
	batch := s.endOrder
	s.endOrder = nil
	s.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	for _, r := range batch {
		s.put(r)
		s.retire(r)
	}
	s.afterCommit(func() { // after the commit
		s.mu.Lock()
		for _, r := range batch {
			if s.ends[r.id] == r {
				delete(s.ends, r.id)
			}
			if s.storing[r.id] == r {
				delete(s.storing, r.id)
			}
			s.wakeLocked(r.id)
		}
		s.moves.Add(1)
		if s.endOrder == nil && cap(batch) <= 2*maxEnds {
			clear(batch)
			s.endOrder = batch[:0]
		}
		s.mu.Unlock()
		s.buffered.Add(-int64(len(batch)))
	})
}

// wakeLocked wakes the callers waiting for the job's end, if any. The
// caller holds mu.
func (s *Scheduler) wakeLocked(jobID string) {
	if c := s.waits[jobID]; c != nil {
		close(c)
		delete(s.waits, jobID)
	}
}

// flush makes every job Submit has returned, and every start, visible to
// read transactions: it stores the pending ones and, by taking the writer
// lock, waits for a transaction that is storing others.
func (s *Scheduler) flush() {
	if s.unsynced.Load() == 0 && s.buffered.Load() == 0 {
		return
	}
	s.sync()
}

// sync is flush without its shortcut: it also waits for a transaction in
// progress.
func (s *Scheduler) sync() {
	s.lock()
	s.drain()
	s.syncStarts()
	s.syncEnds()
	s.unlock()
}

// watch reads the job's record and a channel closed when it changes. A job
// not stored (pending, or written behind) has no channel: its record comes
// from the buffer, and a caller that waits for its end uses waits.
func (s *Scheduler) watch(jobID string) (<-chan struct{}, *record) {
	// A job written behind or pending is found without a read
	// transaction. ends, then starts, then pending: a job is in a later
	// one only before it is in an earlier one.
	s.mu.Lock()
	e, b, p := s.ends[jobID], s.starts[jobID], s.unstoredIDs[jobID]
	s.mu.Unlock()
	switch {
	case e != nil:
		return nil, e
	case b != nil:
		return nil, b
	case p != nil:
		return nil, p
	}
	for try := 0; ; try++ {
		// Read moves before the table: unchanged after it, it means
		// that no submission left pending or draining in between.
		moves := s.moves.Load()
		if ch, r := s.first(s.db.Txn(false), jobID); r != nil {
			if r.state.Terminal() || r.state == Queued && r.seq > s.started.Load() {
				return ch, r
			}
			// Started: its end, or its start, may be written behind,
			// or its record being stored. The channel is closed when
			// the stored record changes.
			s.mu.Lock()
			e, b := s.ends[jobID], s.starts[jobID]
			s.mu.Unlock()
			switch {
			case e != nil:
				return ch, e
			case r.state == Running:
				return ch, r
			case b != nil:
				return ch, b
			}
			s.await() // its record is being stored
			continue
		}
		// Not stored when the table was read: its start or end may be
		// written behind (a job taken from pending is stored only
		// when it ends), or it is pending or being stored. Look for
		// it rather than store the pending jobs, which are cheaper to
		// store in larger batches. A job leaves these places only
		// after the commit that stores it (moves counts that).
		s.mu.Lock()
		e, b, p := s.ends[jobID], s.starts[jobID], s.unstoredIDs[jobID]
		busy := s.storing[jobID] != nil
		moved := s.moves.Load() != moves
		s.mu.Unlock()
		switch {
		case e != nil:
			return nil, e
		case b != nil:
			return nil, b
		case p != nil:
			return nil, p // queued; no channel: it is not stored
		case !busy && !moved:
			return nil, nil
		case try >= 2 && !busy:
			// Moves keep coming: look once more under the writer
			// lock, with no commit in between.
			if !s.stored(jobID) {
				return nil, nil
			}
		}
		s.await()
	}
}

// stored reports whether the job is in the table, or pending, written
// behind or being stored, read under the write lock.
func (s *Scheduler) stored(jobID string) bool {
	s.lock()
	defer s.unlock()
	_, r := s.first(s.db.Txn(false), jobID)
	s.mu.Lock()
	defer s.mu.Unlock()
	return r != nil || s.inUse(jobID)
}

// cancelQueued ends a queued job. The caller holds the write lock.
func (s *Scheduler) cancelQueued(r *record) {
	c := newEnded(r, Cancelled, ending{at: s.now(), err: ErrCancelled})
	c.key, c.idKey = r.key, r.idKey // under the write lock
	s.put(c)
	s.counts.queued.Add(-1)
	s.counts.cancelled.Add(1)
	s.counts.retained.Add(1)
	s.retire(c)
	s.afterCommit(func() {
		s.mu.Lock()
		s.dropUnstored(r) // it may be drained in a transaction whose deferred work is yet to run
		s.wakeLocked(r.id)
		s.mu.Unlock()
	})
}

// retire records that a stored job finished (counted in retained when it
// ended) and forgets the jobs that finished first once more than
// Config.Retain are kept, waking any caller still waiting for them. The
// caller holds the write lock and has stored every earlier end.
func (s *Scheduler) retire(r *record) {
	s.finished.push(r)
	if s.finished.len() <= s.cfg.Retain {
		return
	}
	n := max(1, s.cfg.Retain/8)
	gone := make([]*record, n)
	for i := range gone {
		gone[i] = s.finished.pop()
		s.writes++
		if err := s.write().Delete(table, gone[i]); err != nil {
			panic("scheduler: " + err.Error()) // unreachable: finished jobs are only deleted here
		}
	}
	s.counts.retained.Add(-int64(n))
	s.afterCommit(func() {
		// A Wait that registered after its job's end was stored
		// left its channel here.
		s.mu.Lock()
		for _, r := range gone {
			s.wakeLocked(r.id)
		}
		s.mu.Unlock()
	})
}

// put stores r; it fails only on a schema error, which is a bug here.
func (s *Scheduler) put(r *record) {
	s.writes++
	if err := s.write().Insert(table, r); err != nil {
		panic("scheduler: " + err.Error())
	}
}

// finishedQueue holds the stored records of the kept finished jobs,
// oldest first.
type finishedQueue struct {
	recs []*record
	head int
}

func (q *finishedQueue) len() int { return len(q.recs) - q.head }

func (q *finishedQueue) push(r *record) { q.recs = append(q.recs, r) }

func (q *finishedQueue) pop() *record {
	r := q.recs[q.head]
	q.recs[q.head] = nil
	q.head++
	if q.head >= 1024 && q.head*2 >= len(q.recs) {
		n := copy(q.recs, q.recs[q.head:])
		clear(q.recs[n:])
		q.recs, q.head = q.recs[:n], 0
	}
	return r
}
