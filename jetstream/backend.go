package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// Limits of the streams and buckets, and their defaults.
const (
	maxPayload     = 1 << 20 // a job's spec, or a status, at most
	maxStatus      = 16 << 10
	DefaultMaxJobs = 100_000
	DefaultMaxAge  = 7 * 24 * time.Hour
	DefaultAckWait = 30 * time.Second
	DefaultDeliver = 5
	DefaultPending = 256
)

// Config configures a Backend.
type Config struct {
	// Conn is the connection to NATS; the caller owns it. Required.
	Conn *nats.Conn
	// Name prefixes the stream, bucket and consumer names; "" means
	// "spice". Two names on one server are two independent backends.
	Name string
	// MaxJobs bounds the jobs kept in the stream and the bucket; 0
	// means DefaultMaxJobs. MaxAge bounds how long they are kept; 0
	// means DefaultMaxAge.
	MaxJobs int64
	MaxAge  time.Duration
	// AckWait is how long a worker may go silent before its job is
	// delivered again; workers send heartbeats at a third of it. 0
	// means DefaultAckWait. MaxDeliver bounds deliveries; 0 means
	// DefaultDeliver.
	AckWait    time.Duration
	MaxDeliver int
	// MaxPending bounds the publish acks in flight; 0 means
	// DefaultPending. A publication that finds them all in flight waits
	// for room (its context, or a minute at most), as backpressure.
	MaxPending int
	// MaxEventBytes bounds the events stream (pair timelines) in bytes;
	// 0 means DefaultEventBytes. MaxPairEvents bounds the messages it
	// keeps of one pair; 0 means DefaultPairEvents. The oldest go first,
	// and a reader whose cursor they passed gets ErrGap.
	MaxEventBytes int64
	MaxPairEvents int64
	// MaxEventReaders bounds the reads of the events stream under way at
	// once (each holds a consumer there while it reads); a read beyond
	// it fails at once. 0 means DefaultEventReaders.
	MaxEventReaders int
}

// Backend is the JetStream job backend. It implements job.Backend; its
// Work method makes the calling process a worker.
type Backend struct {
	cfg    Config
	js     jetstream.JetStream
	stream jetstream.Stream
	kv     jetstream.KeyValue
	cons   jetstream.Consumer
	events jetstream.Stream
	health *health
	// playing holds the jobs this process's workers play.
	playing *inflight
	// now is the clock a worker's heartbeat reads to notice that its
	// process was paused; tests replace it.
	now func() time.Time
	// onStall, if set, is called each time a publication waited
	// stallStep for room among the acks in flight; tests set it.
	onStall func()
	// beforeFetch, if set, is called by a worker's slot before each
	// fetch; tests set it.
	beforeFetch func()
}

var _ job.Backend = (*Backend)(nil)

// Open creates or updates the stream, the bucket and the consumer, and
// returns the backend.
func Open(ctx context.Context, cfg Config) (*Backend, error) {
	if cfg.Conn == nil {
		return nil, bound.Missing("jetstream.conn")
	}
	if cfg.Name == "" {
		cfg.Name = "spice"
	}
	if err := id.Check("jetstream.name", cfg.Name); err != nil {
		return nil, err
	}
	if cfg.MaxJobs == 0 {
		cfg.MaxJobs = DefaultMaxJobs
	}
	if cfg.MaxAge == 0 {
		cfg.MaxAge = DefaultMaxAge
	}
	if cfg.AckWait == 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = DefaultDeliver
	}
	if cfg.MaxPending == 0 {
		cfg.MaxPending = DefaultPending
	}
	if cfg.MaxEventBytes == 0 {
		cfg.MaxEventBytes = DefaultEventBytes
	}
	if cfg.MaxPairEvents == 0 {
		cfg.MaxPairEvents = DefaultPairEvents
	}
	if cfg.MaxEventReaders == 0 {
		cfg.MaxEventReaders = DefaultEventReaders
	}
	switch {
	case cfg.MaxJobs < 0, cfg.MaxAge < 0, cfg.AckWait < 0, cfg.MaxDeliver < 0, cfg.MaxPending < 0,
		cfg.MaxEventBytes < 0, cfg.MaxPairEvents < 0, cfg.MaxEventReaders < 0:
		return nil, bound.Malformedf("jetstream.config", "limits must not be negative")
	case cfg.AckWait < 30*time.Millisecond:
		return nil, bound.Malformedf("jetstream.ack_wait", "must be at least 30ms")
	}
	js, err := jetstream.New(cfg.Conn, jetstream.WithPublishAsyncMaxPending(cfg.MaxPending))
	if err != nil {
		return nil, err
	}
	stream, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:       cfg.Name + "_jobs",
		Subjects:   []string{cfg.Name + ".jobs"},
		Retention:  jetstream.WorkQueuePolicy,
		Storage:    jetstream.FileStorage,
		Discard:    jetstream.DiscardNew,
		MaxMsgs:    cfg.MaxJobs,
		MaxBytes:   cfg.MaxJobs * 4 << 10,
		MaxAge:     cfg.MaxAge,
		MaxMsgSize: maxPayload,
		Duplicates: 2 * time.Minute,
	})
	if err != nil {
		return nil, err
	}
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:       cfg.Name + "_state",
		History:      1,
		TTL:          cfg.MaxAge,
		MaxValueSize: maxStatus,
		MaxBytes:     cfg.MaxJobs * 2 << 10, // a status and a cancel key of about 1 KiB each
		Storage:      jetstream.FileStorage,
	})
	if err != nil {
		return nil, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:       cfg.Name + "_workers",
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       cfg.AckWait,
		MaxDeliver:    cfg.MaxDeliver,
		MaxAckPending: int(min(cfg.MaxJobs, 1<<16)),
	})
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, js: js, stream: stream, kv: kv, cons: cons, playing: &inflight{jobs: make(map[string]*held)}, now: time.Now}
	if err := b.openEvents(ctx); err != nil {
		return nil, err
	}
	b.health = watchHealth(cfg.Conn)
	return b, nil
}

// URL is the address of the NATS server the backend is connected to,
// its credentials redacted (a token too).
func (b *Backend) URL() string { return Redact(b.cfg.Conn.ConnectedUrl()) }

// checkJobID holds a job ID to the identifier rules and to what a key
// of the bucket and a token of a subject may be: no ':' and no empty
// token (a '.' first, last or twice in a row).
func checkJobID(jobID string) error {
	if err := id.Check("job.id", jobID); err != nil {
		return err
	}
	if strings.Contains(jobID, ":") || strings.HasPrefix(jobID, ".") || strings.HasSuffix(jobID, ".") || strings.Contains(jobID, "..") {
		return bound.Malformedf("job.id", "a job ID on JetStream has no ':' and no empty '.'-separated part")
	}
	return nil
}

func stateKey(jobID string) string  { return "s." + jobID }
func cancelKey(jobID string) string { return "c." + jobID }

// submitWait bounds Submit's wait for the stream's acknowledgement when
// its context has no deadline.
const submitWait = 10 * time.Second

// Submit records the job queued and publishes it to the jobs stream.
// It returns once the stream has acknowledged the job; a job ID in use is
// a *bound.Error, and a connection that is down an error matching
// job.ErrUnavailable, at once. A job the stream refused (it is full, or
// the job too large) is an error matching ErrRefused, and nothing of it
// is kept: its ID may be submitted again.
//
// Any other error leaves the outcome unknown (the connection was lost
// before the ack, ctx ended): the job is queued and may or may not be on
// the stream. Submit it again with the same ID and spec within a minute
// (maxUnconfirmed) of the first: while the job is queued, Submit
// publishes it again, which the stream stores once (its Nats-Msg-Id is
// the job ID, and the stream's duplicate window two minutes), and
// returns its status. Once a worker took it, or later than that, the ID
// is in use. An ack lost to a connection that comes back within ctx is
// not an error: Submit publishes the job again itself.
func (b *Backend) Submit(ctx context.Context, j job.Job) (job.Status, error) {
	if err := checkJobID(j.ID); err != nil {
		return job.Status{}, err
	}
	if len(j.Spec) > maxPayload-1024 {
		return job.Status{}, bound.Bytes("job.spec", len(j.Spec), maxPayload-1024)
	}
	if err := b.up(); err != nil {
		return job.Status{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, submitWait)
		defer cancel()
	}
	st, err := b.submit(ctx, j)
	if errors.Is(err, ErrRefused) {
		return st, err
	}
	return st, unavailable(ctx, err)
}

func (b *Backend) submit(ctx context.Context, j job.Job) (job.Status, error) {
	st := job.Status{ID: j.ID, State: job.Queued, Submitted: time.Now().UTC()}
	rev, err := b.kv.Create(ctx, stateKey(j.ID), encodeQueued(st, j.Spec))
	created := err == nil
	if errors.Is(err, jetstream.ErrKeyExists) {
		st, rev, err = b.queuedAgain(ctx, j)
	}
	if err != nil {
		return job.Status{}, err
	}
	st.Seq = rev
	msg := nats.NewMsg(b.cfg.Name + ".jobs")
	msg.Header.Set(nats.MsgIdHdr, j.ID)
	msg.Header.Set(queuedHdr, queuedHeader(rev, st.Submitted))
	msg.Data = j.Spec
	refused, err := b.publishJob(ctx, msg, st.Submitted)
	switch {
	case err == nil:
		return st, nil
	case refused && created:
		return job.Status{}, b.unsubmit(ctx, j.ID, rev, err)
	}
	return job.Status{}, err
}

// stallStep is how long one try to publish waits for room among the acks
// in flight before publishAsync checks its context and tries again.
const stallStep = 50 * time.Millisecond

// publishAsync publishes msg without waiting for its ack. While
// MaxPending acks are in flight it waits for room, until ctx ends or
// maxUnconfirmed has passed, rather than failing: a burst of publications
// is held back, not lost.
func (b *Backend) publishAsync(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	deadline := time.Now().Add(maxUnconfirmed)
	for {
		f, err := b.js.PublishMsgAsync(msg, jetstream.WithStallWait(stallStep))
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return f, err
		}
		if b.onStall != nil {
			b.onStall()
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if time.Now().After(deadline) {
			return nil, err
		}
	}
}

// queuedAgain returns the job's status and its revision if it is queued
// under the same spec: a Submit whose outcome was unknown, tried again.
// Any other job under the ID is a conflict.
func (b *Backend) queuedAgain(ctx context.Context, j job.Job) (job.Status, uint64, error) {
	inUse := bound.Conflicting("job.id", "a job with this ID exists")
	e, err := b.kv.Get(ctx, stateKey(j.ID))
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return job.Status{}, 0, inUse // removed meanwhile by a refused Submit
	case err != nil:
		return job.Status{}, 0, err
	}
	var rec queuedRecord
	if len(e.Value()) > maxStatus || json.Unmarshal(e.Value(), &rec) != nil ||
		rec.State != job.Queued || rec.Spec != specDigest(j.Spec) {
		return job.Status{}, 0, inUse
	}
	if time.Since(rec.Submitted) >= maxUnconfirmed {
		// Published again now, it could be stored twice: a second
		// copy delivered while the first plays would take it over.
		return job.Status{}, 0, bound.Conflicting("job.id", "a job with this ID was submitted over "+maxUnconfirmed.String()+" ago and is queued")
	}
	return rec.Status, e.Revision(), nil
}

// publishJob publishes the job's message and waits for the stream's ack.
// An ack that a lost connection swallowed is waited for again on the
// message published again, within maxUnconfirmed of the job's first
// publication at first, which the stream stores once. refused says
// the stream did not store the job: the first publication failed before
// it was sent, or the stream answered with an error (a job it already
// had is acknowledged as a duplicate first).
func (b *Backend) publishJob(ctx context.Context, msg *nats.Msg, first time.Time) (refused bool, err error) {
	for sent := false; ; sent = true {
		fut, err := b.publishAsync(ctx, msg)
		if err != nil {
			return !sent, err
		}
		select {
		case <-fut.Ok():
			return false, nil
		case err := <-fut.Err():
			var apiErr *jetstream.APIError
			switch {
			case errors.Is(err, nats.ErrDisconnected) && time.Since(first) < maxUnconfirmed:
				continue
			case errors.As(err, &apiErr):
				return true, err
			case errors.Is(err, jetstream.ErrNoStreamResponse):
				return !sent, err
			}
			return false, err
		case <-ctx.Done():
			return false, ctx.Err()
		}
	}
}

// unsubmit removes the queued status of a job the stream refused, or
// that ctx ended before it was sent, unless the status changed meanwhile
// (a cancel ended it). Removed, a refusal is ErrRefused and an ended ctx
// its error; otherwise the status stays and the error says so.
func (b *Backend) unsubmit(ctx context.Context, jobID string, rev uint64, cause error) error {
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), submitWait)
	defer cancel()
	if err := b.kv.Delete(dctx, stateKey(jobID), jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("jetstream: the job was not published (%w), and its queued status stays: %w", cause, err)
	}
	if ctx.Err() != nil && errors.Is(cause, ctx.Err()) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrRefused, cause)
}

// Status returns the job's status.
func (b *Backend) Status(ctx context.Context, jobID string) (job.Status, error) {
	if err := b.up(); err != nil {
		return job.Status{}, err
	}
	st, _, err := b.read(ctx, jobID)
	return st, unavailable(ctx, err)
}

// read returns the job's status and its revision.
func (b *Backend) read(ctx context.Context, jobID string) (job.Status, uint64, error) {
	if checkJobID(jobID) != nil {
		// Submit refuses such an ID, so it names no job; asked of the
		// bucket it would be an invalid key, not an absent one.
		return job.Status{}, 0, job.ErrNotFound
	}
	e, err := b.kv.Get(ctx, stateKey(jobID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return job.Status{}, 0, job.ErrNotFound
	}
	if err != nil {
		return job.Status{}, 0, err
	}
	st, err := decode(e.Value())
	st.Seq = e.Revision()
	return st, e.Revision(), err
}

// Statuses yields the jobs in state (every job for 0) in submission
// order, or, once, why it could not list them (an error matching
// job.ErrUnavailable while the connection is down).
func (b *Backend) Statuses(ctx context.Context, state job.State) iter.Seq2[job.Status, error] {
	return func(yield func(job.Status, error) bool) {
		var all []job.Status
		err := b.scan(ctx, func(st job.Status) {
			if state == 0 || st.State == state {
				all = append(all, st)
			}
		})
		if err != nil {
			yield(job.Status{}, err)
			return
		}
		slices.SortFunc(all, func(a, b job.Status) int { return a.Submitted.Compare(b.Submitted) })
		for _, st := range all {
			if !yield(st, nil) {
				return
			}
		}
	}
}

// scan calls fn with every job's status, in no order, from one watch of
// the bucket's status keys: their values arrive in one stream of
// messages, not one request per key. A malformed status is skipped.
func (b *Backend) scan(ctx context.Context, fn func(job.Status)) error {
	if err := b.up(); err != nil {
		return err
	}
	parent := ctx
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, submitWait)
		defer cancel()
	}
	w, err := b.kv.WatchFiltered(ctx, []string{stateKey(">")}, jetstream.IgnoreDeletes())
	if err != nil {
		return unavailable(parent, err)
	}
	defer func() { _ = w.Stop() }()
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return unavailable(parent, errWatchEnded)
			}
			if e == nil { // every status is delivered
				return nil
			}
			st, err := decode(e.Value())
			if err != nil {
				continue
			}
			st.Seq = e.Revision()
			fn(st)
		case <-ctx.Done():
			return unavailable(parent, ctx.Err())
		}
	}
}

var errWatchEnded = fmt.Errorf("%w: the watch of the statuses ended before it had them all", job.ErrUnavailable)

// Cancel asks for the job's cancellation: a queued job ends cancelled at
// once, a running one when its worker sees the request.
func (b *Backend) Cancel(ctx context.Context, jobID string) error {
	if err := b.up(); err != nil {
		return err
	}
	if _, _, err := b.read(ctx, jobID); err != nil {
		return unavailable(ctx, err)
	}
	if _, err := b.kv.Put(ctx, cancelKey(jobID), []byte("1")); err != nil {
		return unavailable(ctx, err)
	}
	_, err := b.transition(ctx, jobID, func(st job.Status) (job.Status, bool) {
		if st.State != job.Queued {
			return st, false
		}
		st.State, st.Reason, st.Error, st.Ended = job.Cancelled, job.ReasonCancelled, "job cancelled before its pair started", time.Now().UTC()
		return st, true
	})
	return unavailable(ctx, err)
}

// Await blocks until the job has ended or ctx is done.
func (b *Backend) Await(ctx context.Context, jobID string) (job.Status, error) {
	// A refused Submit's status is deleted: not found, as one never
	// written.
	w, err := b.kv.Watch(ctx, stateKey(jobID), jetstream.IgnoreDeletes())
	if err != nil {
		return job.Status{}, err
	}
	defer func() { _ = w.Stop() }()
	seen := false
	for {
		select {
		case e, ok := <-w.Updates():
			if !ok {
				return job.Status{}, ctx.Err()
			}
			if e == nil { // the initial values are delivered
				if !seen {
					return job.Status{}, job.ErrNotFound
				}
				continue
			}
			seen = true
			st, err := decode(e.Value())
			if err != nil {
				return job.Status{}, err
			}
			if st.State.Terminal() {
				st.Seq = e.Revision()
				return st, nil
			}
		case <-ctx.Done():
			return job.Status{}, ctx.Err()
		}
	}
}

// transition applies change to the job's status by compare-and-swap,
// reading it again after a conflict. A terminal status is never changed.
// It returns the status it wrote, or the one it left as it was.
func (b *Backend) transition(ctx context.Context, jobID string, change func(job.Status) (job.Status, bool)) (job.Status, error) {
	st, _, err := b.transitionFrom(ctx, jobID, job.Status{}, 0, change)
	return st, err
}

// transitionFrom is transition starting from a status and its revision
// that the caller believes current, which saves the read when it is; rev
// 0 reads first. It also returns the revision of the status it returns.
func (b *Backend) transitionFrom(ctx context.Context, jobID string, st job.Status, rev uint64, change func(job.Status) (job.Status, bool)) (job.Status, uint64, error) {
	for range 16 {
		if rev == 0 {
			var err error
			if st, rev, err = b.read(ctx, jobID); err != nil {
				return st, 0, err
			}
		}
		if st.State.Terminal() {
			return st, rev, nil
		}
		next, ok := change(st)
		if !ok {
			return st, rev, nil
		}
		nrev, err := b.kv.Update(ctx, stateKey(jobID), encode(next), rev)
		if err == nil {
			return next, nrev, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return st, rev, err
		}
		rev = 0
	}
	return job.Status{}, 0, errContended
}

// queuedHdr carries, on a job's message, the revision and submission
// time of the queued status Submit wrote, so that a worker claims the
// job without reading its status first. A wrong value only costs the
// read: the compare-and-swap refuses it.
const queuedHdr = "Spice-Queued"

func queuedHeader(rev uint64, submitted time.Time) string {
	return strconv.FormatUint(rev, 10) + " " + strconv.FormatInt(submitted.UnixNano(), 10)
}

// queuedStatus reads queuedHdr: the job's queued status and its
// revision, or rev 0.
func queuedStatus(jobID, v string) (job.Status, uint64) {
	if len(v) > 64 {
		return job.Status{}, 0
	}
	r, ns, ok := strings.Cut(v, " ")
	rev, err1 := strconv.ParseUint(r, 10, 64)
	n, err2 := strconv.ParseInt(ns, 10, 64)
	if !ok || err1 != nil || err2 != nil || rev == 0 {
		return job.Status{}, 0
	}
	return job.Status{ID: jobID, State: job.Queued, Submitted: time.Unix(0, n).UTC(), Seq: rev}, rev
}

var errContended = errors.New("jetstream: job status changed too often to update")

// ErrRefused is returned by Submit when the jobs stream refused the job
// (it is full, or the job too large for it): nothing of the job is kept,
// and its ID may be submitted again.
var ErrRefused = errors.New("jetstream: the jobs stream refused the job")

// queuedRecord is the status Submit writes: the queued status and its
// spec's digest, so that a Submit of the same ID and spec, after an
// outcome it could not know, is told apart from another job's. A
// worker's first change of the status drops the digest.
type queuedRecord struct {
	job.Status
	Spec string `json:"SpecSHA256"`
}

func encodeQueued(st job.Status, spec []byte) []byte {
	b, err := json.Marshal(queuedRecord{Status: st, Spec: specDigest(spec)})
	if err != nil {
		panic("jetstream: " + err.Error()) // a Status always marshals
	}
	return b
}

func specDigest(spec []byte) string {
	sum := sha256.Sum256(spec)
	return hex.EncodeToString(sum[:])
}

func encode(st job.Status) []byte {
	b, err := json.Marshal(st)
	if err != nil {
		panic("jetstream: " + err.Error()) // a Status always marshals
	}
	return b
}

// ErrBadStatus is returned for a status record that is not one.
var ErrBadStatus = errors.New("jetstream: malformed job status")

func decode(b []byte) (job.Status, error) {
	var st job.Status
	if len(b) > maxStatus {
		return st, ErrBadStatus
	}
	if err := json.Unmarshal(b, &st); err != nil || st.ID == "" || st.State == 0 {
		return job.Status{}, ErrBadStatus
	}
	return st, nil
}
