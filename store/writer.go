package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Group commit bounds: how many events, and how many encoded bytes, one
// transaction takes at most, and how many events may wait for the writer.
// Five hundred streaming pairs keep about a thousand logs appending at
// once; a batch of 512 lets them share a sync where 128 made four.
const (
	maxBatch      = 512
	maxBatchBytes = 8 << 20
	queueSize     = 1024
)

var _ eventlog.Observer = (*Store)(nil)

// Observe records e and returns nil only once its row is durable (K16,
// K17): committed in a transaction whose WAL sync returned. It blocks while
// the writer is busy, which is the backpressure a required observer may
// apply, and returns an error when ctx ends first; the event may then still
// be written, but it was not acknowledged.
//
// e must come from a named log (Event.Log), the name every row is keyed
// by. Writing an event whose log and sequence are already recorded with the
// same bytes is acknowledged without a change; different bytes are an
// *IntegrityError.
func (s *Store) Observe(ctx context.Context, e eventlog.Event) error {
	if e.IsZero() {
		return bound.Missing("event")
	}
	if e.Log() == "" {
		return bound.Missing("event.log")
	}
	if e.Seq() > math.MaxInt64 {
		return bound.Malformedf("event.seq", "beyond what the store can key")
	}
	if err := ctx.Err(); err != nil {
		return notAcknowledged(e, err)
	}
	r := getRequest()
	r.e = e
	var err error
	if r.body, err = encode(e, r.body[:0]); err != nil {
		putRequest(r)
		return err
	}
	if err := bound.Bytes("event", len(r.body), eventlog.MaxEventBytes); err != nil {
		putRequest(r)
		return err
	}
	r.time = e.Time().Format(eventlog.TimeLayout)
	if err := s.enqueue(ctx, r); err != nil {
		putRequest(r)
		return notAcknowledged(e, err)
	}
	select {
	case err := <-r.done:
		putRequest(r)
		return err
	case <-ctx.Done():
		// The writer still owns r and will answer into its buffer; r is
		// left to the garbage collector.
		return notAcknowledged(e, ctx.Err())
	}
}

// enqueue hands r to the writer while holding the read lock, so that Close,
// which takes the write lock, knows every handed event is in the queue.
// Only the writer's goroutine commits: a caller that waits for its answer
// can stop waiting when its ctx ends, whatever the commit is doing (K17).
func (s *Store) enqueue(ctx context.Context, r *request) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	switch {
	case s.closed:
		return ErrClosed
	case s.w == nil:
		return ErrReadOnly
	}
	select {
	case s.w.queue <- r:
		if s.w.hooks.queued != nil {
			s.w.hooks.queued()
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ErrPayloadPanic is returned by Observe for an event whose payload
// panicked while it was being encoded. The panic value is not kept: it
// could hold a secret.
var ErrPayloadPanic = errors.New("store: event payload panicked while encoding")

// encode appends e's canonical bytes, containing a panic of its payload,
// which is code the store does not own.
func encode(e eventlog.Event, dst []byte) (b []byte, err error) {
	defer func() {
		if recover() != nil {
			b, err = dst[:0], ErrPayloadPanic
		}
	}()
	return e.AppendJSON(dst), nil
}

func notAcknowledged(e eventlog.Event, err error) error {
	return fmt.Errorf("store: event %d of log %q not acknowledged: %w", e.Seq(), e.Log(), err)
}

// request is one event waiting for its commit.
type request struct {
	e    eventlog.Event
	body []byte
	time string     // e's time as the time column holds it
	done chan error // buffered: the writer never waits for the caller
}

var requests = sync.Pool{New: func() any { return &request{done: make(chan error, 1)} }}

func getRequest() *request { return requests.Get().(*request) }

func putRequest(r *request) {
	r.e, r.time = eventlog.Event{}, ""
	if cap(r.body) > 64<<10 {
		r.body = nil // do not keep a large buffer alive in the pool
	}
	r.body = r.body[:0]
	requests.Put(r)
}

// writer owns the one connection that writes, and the goroutine that
// commits queued events in batches.
type writer struct {
	conn   *sql.Conn
	st     statements
	queue  chan *request
	quit   chan struct{} // closed by stop
	exited chan struct{} // closed when the goroutine returns
	logs   logCache      // used by the goroutine only
	batch  []*request
	errs   []error
	policy checkpointer // used by the goroutine only
	hooks  hooks        // set before the goroutine starts, never after
}

// hooks are a writer's test hooks, nil outside tests (export_test.go sets
// them): queued runs after a request was queued, on the caller's
// goroutine; commit runs inside every transaction, just before its COMMIT,
// on the writer's goroutine. They belong to one store, so a test's hooks
// never fire in another test's store.
type hooks struct {
	queued, commit func()
}

func (w *writer) start(ctx context.Context) error {
	if err := w.st.prepare(ctx, w.conn); err != nil {
		return err
	}
	if err := w.policy.init(ctx, w.conn); err != nil {
		return err
	}
	w.queue = make(chan *request, queueSize)
	w.quit = make(chan struct{})
	w.exited = make(chan struct{})
	w.logs = logCache{}
	go w.run()
	return nil
}

// abandon releases what start prepared when Open fails before the
// goroutine runs.
func (w *writer) abandon() {
	w.st.close()
	w.conn.Close()
}

// stop makes the goroutine commit what is queued and return, then closes
// the connection.
func (w *writer) stop() error {
	close(w.quit)
	<-w.exited
	w.st.close()
	return w.conn.Close()
}

func (w *writer) run() {
	defer close(w.exited)
	for {
		select {
		case r := <-w.queue:
			w.queued(r)
		case <-w.quit:
			// Close holds the store's lock: nothing more can be queued.
			for {
				select {
				case r := <-w.queue:
					w.queued(r)
				default:
					return
				}
			}
		}
	}
}

// queued commits r and whatever else is queued, then checkpoints if due:
// every caller of the batch is answered by then, so a checkpoint delays
// the next batch, never an acknowledgement.
func (w *writer) queued(r *request) {
	batch := w.collect(r)
	n := len(batch)
	w.commit(batch)
	if w.policy.due() {
		w.checkpoint()
	}
	if n > 1 {
		// The callers just answered are ready to run on this thread: let
		// them hand their next events before the next batch is taken, so
		// that concurrent logs share one sync rather than alternate
		// between two half-full ones.
		runtime.Gosched()
	}
}

// collect takes r and whatever else is queued, within the batch bounds.
func (w *writer) collect(r *request) []*request {
	batch := append(w.batch[:0], r)
	size := len(r.body)
	for len(batch) < maxBatch && size < maxBatchBytes {
		select {
		case r := <-w.queue:
			batch = append(batch, r)
			size += len(r.body)
		default:
			return batch
		}
	}
	return batch
}

// commit writes batch in one transaction and answers every request. An
// integrity conflict fails only its own event; any other failure fails the
// whole batch, which is rolled back.
func (w *writer) commit(batch []*request) {
	w.batch = batch
	errs := w.errs[:0]
	for range batch {
		errs = append(errs, nil)
	}
	w.errs = errs
	err := w.write(batch, errs)
	size := 0
	for i, r := range batch {
		size += rowBytes(r)
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
		batch[i] = nil
	}
	if err == nil {
		w.policy.add(len(batch), size)
	}
}

// rowBytes is about what r's row takes in the events table: its columns
// and SQLite's record and cell headers.
func rowBytes(r *request) int {
	return len(r.e.Log()) + len(r.e.Kind()) + len(r.time) + len(r.body) + 24
}

// write runs the transaction. Statements use a context of their own: a
// caller that stops waiting does not cut a commit other callers share.
func (w *writer) write(batch []*request, errs []error) (err error) {
	ctx := context.Background()
	if _, err = w.st.begin.ExecContext(ctx); err != nil {
		return fmt.Errorf("store: begin: %w", err)
	}
	defer func() {
		if err != nil {
			w.logs.reset() // what the rolled-back batch taught it is void
			if _, rerr := w.st.rollback.ExecContext(ctx); rerr != nil && !noTransaction(rerr) {
				err = errors.Join(err, fmt.Errorf("store: rollback: %w", rerr))
			}
		}
	}()
	for i, r := range batch {
		fresh, err := w.insert(ctx, r)
		if err != nil {
			return err
		}
		if fresh {
			if err := w.derive(ctx, r.e, r.body); err != nil {
				return fmt.Errorf("store: deriving event %d of log %q: %w", r.e.Seq(), r.e.Log(), err)
			}
			continue
		}
		if same, err := w.sameBytes(ctx, r); err != nil {
			return err
		} else if !same {
			errs[i] = &IntegrityError{Log: r.e.Log(), Seq: r.e.Seq(), Reason: reasonConflict}
		}
	}
	if w.hooks.commit != nil {
		w.hooks.commit()
	}
	if _, err = w.st.commit.ExecContext(ctx); err != nil {
		return fmt.Errorf("store: commit: %w", err)
	}
	return nil
}

// insert adds r's row unless its log and sequence are taken, and reports
// whether it did.
func (w *writer) insert(ctx context.Context, r *request) (bool, error) {
	res, err := w.st.insertEvent.ExecContext(ctx, r.e.Log(), int64(r.e.Seq()), r.e.Kind(), r.time, r.body)
	if err != nil {
		return false, fmt.Errorf("store: writing event %d of log %q: %w", r.e.Seq(), r.e.Log(), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, nil
}

// sameBytes compares r with the row that already holds its sequence.
func (w *writer) sameBytes(ctx context.Context, r *request) (bool, error) {
	var old []byte
	if err := w.st.selectBody.QueryRowContext(ctx, r.e.Log(), int64(r.e.Seq())).Scan(&old); err != nil {
		return false, fmt.Errorf("store: reading event %d of log %q: %w", r.e.Seq(), r.e.Log(), err)
	}
	return bytes.Equal(old, r.body), nil
}

// noTransaction reports SQLite's answer to a ROLLBACK after SQLite already
// rolled the transaction back itself (as it does on some I/O errors).
func noTransaction(err error) bool {
	return err != nil && bytes.Contains([]byte(err.Error()), []byte("no transaction is active"))
}

// pageSize is the page size of a new store. Concurrent logs append at as
// many places of the events index as there are logs, so a commit writes
// about one index page per event it holds: small pages keep the bytes each
// commit writes and syncs small. An existing file keeps its page size.
const pageSize = 1024
