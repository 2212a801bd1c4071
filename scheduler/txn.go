package scheduler

import "github.com/hashicorp/go-memdb"

// The table's write lock. Every write happens under wmu, in one memdb write
// transaction that write opens when it is first needed, so a pool
// goroutine whose step only buffers (an end or a start written behind, a
// job taken from the submission buffer) opens none. unlock commits it, or
// aborts it when it wrote nothing (a commit of nothing costs a new root),
// releases wmu, and only then runs the work deferred to after the commit
// (afterCommit), last deferred first, as memdb's Txn.Defer does: like
// memdb's own writer lock, wmu is free again before that work runs.
//
// The fields below are guarded by wmu.
type writeLock struct {
	txn   *memdb.Txn // nil until write
	after []func()
	mark  uint64 // Scheduler.writes when the lock was taken
}

// lock takes the table's write lock.
func (s *Scheduler) lock() {
	s.wmu.Lock()
	s.w.mark = s.writes
}

// write returns the write transaction, opening it. The caller holds wmu.
func (s *Scheduler) write() *memdb.Txn {
	if s.w.txn == nil {
		s.w.txn = s.db.Txn(true)
	}
	return s.w.txn
}

// afterCommit runs fn once the transaction has committed and the write
// lock is released. The caller holds wmu and has written.
func (s *Scheduler) afterCommit(fn func()) {
	s.w.after = append(s.w.after, fn)
}

// unlock commits what was written, releases the write lock and runs the
// deferred work.
func (s *Scheduler) unlock() {
	txn, after := s.w.txn, s.w.after
	s.w.txn, s.w.after = nil, nil
	if txn != nil {
		if s.writes != s.w.mark {
			txn.Commit()
		} else {
			txn.Abort()
		}
	}
	s.wmu.Unlock()
	for i := len(after) - 1; i >= 0; i-- {
		after[i]()
	}
}

// await waits for the write in progress, if any, to commit.
func (s *Scheduler) await() {
	s.wmu.Lock()
	s.wmu.Unlock() //nolint:staticcheck // an empty critical section: waiting is the point
}
