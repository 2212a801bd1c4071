package scheduler

import (
	"iter"
	"strconv"

	"github.com/hashicorp/go-memdb"
)

// The read model: one go-memdb table of job snapshots that List reads
// without taking the scheduler's lock. It is written in the same critical
// section as every transition, so it never lags the jobs map; it is
// never read to decide what a job does. Its one index is by state, then
// submission order: a transition moves the job's row (delete, insert),
// List of one state is a prefix scan, and List of every job merges the
// five states' scans. A second index, by state beside one by submission
// order, cost twice as much per transition: measured in alternating
// rounds, the scheduler's CPU per pair over a Team's was 3.0 without an
// index by state, 3.4 with this one and 4.0 with two indexes.
const (
	table = "jobs"
	bySeq = "id" // the primary index: memdb requires the name
)

// row is a job's snapshot in the read model. A stored row is never
// changed: a transition deletes it and stores a new one.
type row struct {
	State State
	// Key is the submission number in fixed-width hex, so that one
	// state's rows iterate in submission order.
	Key  string
	Info Info
}

func newSchema() *memdb.DBSchema {
	return &memdb.DBSchema{Tables: map[string]*memdb.TableSchema{
		table: {Name: table, Indexes: map[string]*memdb.IndexSchema{
			bySeq: {Name: bySeq, Unique: true, Indexer: &memdb.CompoundIndex{Indexes: []memdb.Indexer{
				&memdb.UintFieldIndex{Field: "State"},
				&memdb.StringFieldIndex{Field: "Key"},
			}}},
		}},
	}}
}

// rows yields the rows of txn in state, or of every state for state 0,
// in submission order.
func rows(txn *memdb.Txn, state State) iter.Seq[*row] {
	if state != 0 {
		it := scan(txn, state)
		return func(yield func(*row) bool) {
			for r := next(it); r != nil; r = next(it) {
				if !yield(r) {
					return
				}
			}
		}
	}
	return func(yield func(*row) bool) {
		// The head of each state's scan; the least key goes first.
		var its [Cancelled]memdb.ResultIterator
		var heads [Cancelled]*row
		for i := range its {
			its[i] = scan(txn, State(i)+Queued)
			heads[i] = next(its[i])
		}
		for {
			m := -1
			for i, h := range heads {
				if h != nil && (m < 0 || h.Key < heads[m].Key) {
					m = i
				}
			}
			if m < 0 || !yield(heads[m]) {
				return
			}
			heads[m] = next(its[m])
		}
	}
}

// scan is the prefix scan of state's rows.
func scan(txn *memdb.Txn, state State) memdb.ResultIterator {
	it, err := txn.Get(table, bySeq+"_prefix", state, "")
	if err != nil {
		panic("scheduler: read model: " + err.Error()) // a schema error: a bug here
	}
	return it
}

func next(it memdb.ResultIterator) *row {
	if raw := it.Next(); raw != nil {
		return raw.(*row)
	}
	return nil
}

// seqKey spells n in 16 hex digits.
func seqKey(n uint64) string {
	const zeros = "0000000000000000"
	h := strconv.FormatUint(n, 16)
	return zeros[len(h):] + h
}
