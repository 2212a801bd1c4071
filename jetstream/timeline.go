package jetstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// Limits and defaults of the events stream and its batches.
const (
	// DefaultEventBytes bounds the events stream; DefaultPairEvents the
	// messages it keeps per pair.
	DefaultEventBytes = 256 << 20
	DefaultPairEvents = 1 << 16
	// DefaultEventReaders bounds the reads of the stream at once.
	DefaultEventReaders = 1024
	// DefaultBatch is how many events one message carries at most, and
	// DefaultLinger how long the first event of an unfilled batch waits
	// for more before the batch is published anyway.
	DefaultBatch  = 64
	DefaultLinger = 20 * time.Millisecond
	MaxBatch      = 4096
	// batchBytes is where a batch is published whatever its count: well
	// under the message size limit, so one more event still fits.
	batchBytes = 256 << 10
)

// ErrGap is returned by a timeline reader that finds an event missing
// after its cursor: the stream's limits let it go.
var ErrGap = errors.New("jetstream: the pair's timeline has a gap")

// ErrBadBatch is returned for an events message that is not a batch of
// events in sequence.
var ErrBadBatch = errors.New("jetstream: malformed events message")

// attemptHdr names, on a timeline message, the attempt of the job (its
// delivery's number) that published it: readers yield nothing a
// superseded attempt published after its successor's first message.
const attemptHdr = "Spice-Attempt"

// maxAttemptDigits bounds the attempt header a reader parses: a uint64.
const maxAttemptDigits = 20

// attempts follows the attempts that a subject's messages name, as a
// reader goes through them in stream order.
type attempts struct{ newest uint64 }

// superseded reports whether a message with headers h was published by
// an attempt older than one that published before it on the subject:
// a worker that lost its job (paused past AckWait) and has not noticed
// yet. A reader skips such a message whole: it yields none of its
// events and counts none as missing. A message that names no attempt
// (published outside a worker's play, or by a worker older than the
// header) is never superseded and supersedes nothing. A malformed
// attempt is ErrBadBatch.
func (a *attempts) superseded(h nats.Header) (bool, error) {
	v := h.Get(attemptHdr)
	switch {
	case v == "":
		return false, nil
	case len(v) > maxAttemptDigits:
		return false, ErrBadBatch
	}
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n == 0 {
		return false, ErrBadBatch
	}
	if n < a.newest {
		return true, nil
	}
	a.newest = n
	return false, nil
}

// eventsSubject is where a pair's timeline goes; one subject per pair
// lets a reader filter it out of the stream.
func (b *Backend) eventsSubject(pairID string) string { return b.cfg.Name + ".ev." + pairID }

// openEvents creates or updates the events stream.
func (b *Backend) openEvents(ctx context.Context) error {
	s, err := b.js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:              b.cfg.Name + "_events",
		Subjects:          []string{b.cfg.Name + ".ev.>"},
		Retention:         jetstream.LimitsPolicy,
		Storage:           jetstream.FileStorage,
		Discard:           jetstream.DiscardOld,
		MaxBytes:          b.cfg.MaxEventBytes,
		MaxAge:            b.cfg.MaxAge,
		MaxMsgsPerSubject: b.cfg.MaxPairEvents,
		MaxMsgSize:        maxPayload,
		Duplicates:        2 * time.Minute,
		MaxConsumers:      b.cfg.MaxEventReaders,
	})
	b.events = s
	return err
}

// TimelineConfig configures a pair's timeline publisher.
type TimelineConfig struct {
	// Batch is the most events one message carries: 1 sends each event
	// alone, 0 means DefaultBatch. Linger bounds how long an event waits
	// for its batch to fill; 0 means DefaultLinger.
	Batch  int
	Linger time.Duration
}

// Timeline returns an observer that publishes the pair's timeline to the
// events stream. Place it among the pair's required observers. Events
// travel in batches of consecutive sequences, each message's Nats-Msg-Id
// naming the pair and its range, so that a batch published twice is
// stored once. A batch is published when it is full, when Linger has
// passed since its first event, at a tool.started and at the pair's
// terminal; at those two Observe returns only once every batch of the
// pair is stored: a tool call runs only once its start is on the
// stream, and a pair that has ended has its whole timeline there. A
// batch is sent only once the one before it is stored; one whose ack a
// lost connection swallowed (the server restarted) is sent again, within
// maxUnconfirmed of its first sending, and stored once.
//
// Made within a worker's play, the publisher belongs to the attempt that
// play holds: each message names the attempt (header Spice-Attempt, and
// the Nats-Msg-Id ends in @<attempt>), and once another delivery of the
// job took it over, on another worker or on another slot of this one,
// it publishes nothing more and Observe fails. What it published after
// the newer attempt's first message, before it could know (a worker
// paused past AckWait notices at its next heartbeat), is on the stream
// but no reader yields it. A publisher made outside a play names no
// attempt.
func (b *Backend) Timeline(pairID string, cfg TimelineConfig) (*Publisher, error) {
	if err := id.Check("pair.id", pairID); err != nil {
		return nil, err
	}
	if cfg.Batch == 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.Linger == 0 {
		cfg.Linger = DefaultLinger
	}
	if cfg.Batch < 1 || cfg.Batch > MaxBatch {
		return nil, bound.Count("timeline.batch", cfg.Batch, MaxBatch)
	}
	if cfg.Linger < 0 {
		return nil, bound.Malformedf("timeline.linger", "must not be negative")
	}
	// Created by a play, the publisher belongs to the attempt the play
	// holds: a later attempt of the job, on this worker or another, does
	// not make it its own.
	p := &Publisher{b: b, cfg: cfg, pairID: pairID, subject: b.eventsSubject(pairID), held: b.playing.get(pairID)}
	if p.held != nil {
		p.attempt = strconv.Itoa(p.held.attempt)
	}
	return p, nil
}

// Publisher publishes one pair's timeline; see Backend.Timeline.
type Publisher struct {
	b       *Backend
	cfg     TimelineConfig
	pairID  string
	subject string
	// held is the attempt of the job that this worker held when the
	// publisher was made, and attempt its number; nil and "" outside a
	// play.
	held    *held
	attempt string

	mu          sync.Mutex
	buf         []byte // the batch: events' canonical JSON, one a line
	first, last uint64 // the batch's range; first is 0 when it is empty
	n           int
	timer       *time.Timer
	// sent is the batch published and not known stored, nil when none:
	// one at a time, so that a batch whose ack a lost connection
	// swallowed is published again before any batch after it.
	sent *sentBatch
	err  error // the first failure; every later Observe returns it
	// With fenced, the first batch is stored only if the pair's
	// subject's last message has stream sequence fence (0: none), so
	// that a resumed pair continues exactly the timeline it was rebuilt
	// from.
	fence  uint64
	fenced bool
}

// Observe adds e to the batch and publishes the batch when it is due.
// An event out of sequence, or one too large for a message, is refused.
func (p *Publisher) Observe(ctx context.Context, e eventlog.Event) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return p.err
	}
	if err := p.heldStopped(); err != nil {
		// Another delivery took the job over, or the draining worker
		// hands it back: what this attempt does now, its terminal
		// above all, must not reach the stream.
		p.buf, p.n, p.first = nil, 0, 0
		p.fail(err)
		return p.err
	}
	if p.last != 0 && e.Seq() != p.last+1 {
		return bound.Malformedf("timeline.seq", "event "+strconv.FormatUint(e.Seq(), 10)+" does not follow "+strconv.FormatUint(p.last, 10))
	}
	if e.EncodedLen() > maxPayload-1024 {
		return bound.Bytes("timeline.event", e.EncodedLen(), maxPayload-1024)
	}
	if p.n > 0 && len(p.buf)+e.EncodedLen() > batchBytes {
		p.flushLocked(ctx)
	}
	if p.n == 0 {
		p.first = e.Seq()
	}
	p.buf = append(e.AppendJSON(p.buf), '\n')
	p.last = e.Seq()
	p.n++
	terminal := orchestrator.Terminal(e.Kind())
	// A tool call runs after its tool.started returns: stored first,
	// so that a worker resuming the pair from the stream finds every
	// call that may have taken effect, and every model output before.
	// A fenced first batch is stored (or refused) before any other is
	// sent, so that nothing follows a refused one.
	durable := e.Kind() == event.KindToolStarted || p.fenced
	switch {
	case terminal || durable || p.n >= p.cfg.Batch:
		p.flushLocked(ctx)
	case p.n == 1:
		if p.timer == nil {
			p.timer = time.AfterFunc(p.cfg.Linger, p.linger)
		} else {
			p.timer.Reset(p.cfg.Linger)
		}
	}
	if terminal || durable {
		return p.settleLocked(ctx)
	}
	return p.err
}

// heldStopped reports why the attempt the publisher belongs to publishes
// nothing more, or nil.
func (p *Publisher) heldStopped() error {
	if p.held == nil {
		return nil
	}
	return p.held.stopped()
}

// linger publishes a batch that did not fill in time, or, while the
// batch before it is not known stored, tries again a linger later.
func (p *Publisher) linger() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == 0 || p.err != nil {
		return
	}
	// It never waits: not for the batch before, not for room among the
	// acks in flight; the next Observe does.
	if !p.settledLocked() || !p.sendLocked(context.Background(), false) {
		p.timer.Reset(p.cfg.Linger)
	}
}

// maxUnconfirmed bounds how long a batch may go without its ack, lost
// connections and republishing included: well within the events
// stream's duplicates window, so that a batch published again is never
// stored twice.
const maxUnconfirmed = time.Minute

// sentBatch is a published batch and its ack.
type sentBatch struct {
	msg    *nats.Msg
	ack    jetstream.PubAckFuture
	first  time.Time // when it was first published
	resent bool
	// failed is the error its ack came with, kept for settleLocked by
	// settledLocked, which does not wait to publish it again.
	failed error
}

// flushLocked publishes the batch once the one before it is stored.
func (p *Publisher) flushLocked(ctx context.Context) {
	if p.timer != nil {
		p.timer.Stop()
	}
	if p.settleLocked(ctx) != nil {
		p.buf, p.n, p.first = nil, 0, 0
		return
	}
	p.sendLocked(ctx, true)
}

// sendLocked publishes the batch without waiting for its ack; the batch
// before it is stored. The backend bounds the acks in flight: with wait,
// it waits for room (see publishAsync); without, it reports false,
// keeping the batch, when there is none.
func (p *Publisher) sendLocked(ctx context.Context, wait bool) bool {
	if p.timer != nil {
		p.timer.Stop()
	}
	msg := nats.NewMsg(p.subject)
	msgID := p.pairID + "." + strconv.FormatUint(p.first, 10) + "-" + strconv.FormatUint(p.last, 10)
	if p.attempt != "" {
		// Two attempts' batches of one range are different messages:
		// a superseded attempt's must not make its successor's a
		// duplicate, which the stream would drop.
		msg.Header.Set(attemptHdr, p.attempt)
		msgID += "@" + p.attempt
	}
	msg.Header.Set(nats.MsgIdHdr, msgID)
	if p.fenced {
		msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(p.fence, 10))
	}
	msg.Data = p.buf
	var f jetstream.PubAckFuture
	var err error
	if wait {
		f, err = p.b.publishAsync(ctx, msg)
	} else {
		f, err = p.b.js.PublishMsgAsync(msg, jetstream.WithStallWait(time.Millisecond))
		if errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return false
		}
	}
	p.fenced = false
	p.buf, p.n, p.first = nil, 0, 0
	if err != nil {
		p.fail(err)
		return true
	}
	p.sent = &sentBatch{msg: msg, ack: f, first: time.Now()}
	return true
}

// settledLocked reports, without waiting, whether no batch is in
// flight. A batch whose ack failed is not: settleLocked publishes it
// again or fails.
func (p *Publisher) settledLocked() bool {
	if p.sent == nil {
		return true
	}
	if p.sent.failed != nil {
		return false
	}
	select {
	case <-p.sent.ack.Ok():
		p.sent = nil
		return true
	case err := <-p.sent.ack.Err():
		p.sent.failed = err
		return false
	default:
		return false
	}
}

// retryLocked publishes the batch in flight again after err, if err
// says the connection was lost before its ack came and the batch is
// young enough: its Nats-Msg-Id makes the stream store it once.
// Otherwise the publisher fails.
func (p *Publisher) retryLocked(ctx context.Context, err error) {
	b := p.sent
	if b.resent && p.wasStoredLocked(ctx, err) {
		p.sent = nil
		return
	}
	if errors.Is(err, nats.ErrDisconnected) && time.Since(b.first) < maxUnconfirmed {
		b.resent = true
		// While reconnecting it waits in the connection's buffer,
		// sent before anything published after it.
		f, perr := p.b.publishAsync(ctx, b.msg)
		if perr == nil {
			b.ack = f
			return
		}
		err = perr
	}
	p.sent = nil
	p.fail(err)
}

// wasStoredLocked reports whether the fenced batch in flight, sent
// again and refused for the subject's last message, was refused for its
// own first sending: the stream checks the fence before the duplicate.
func (p *Publisher) wasStoredLocked(ctx context.Context, err error) bool {
	var apiErr *jetstream.APIError
	if p.sent.msg.Header.Get(jetstream.ExpectedLastSubjSeqHeader) == "" ||
		!errors.As(err, &apiErr) || apiErr.ErrorCode != jetstream.JSErrCodeStreamWrongLastSequence {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, submitWait)
	defer cancel()
	last, gerr := p.b.events.GetLastMsgForSubject(ctx, p.subject)
	return gerr == nil && last.Header.Get(nats.MsgIdHdr) == p.sent.msg.Header.Get(nats.MsgIdHdr)
}

func (p *Publisher) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// errUnconfirmed fails a publisher whose batch went unacknowledged for
// maxUnconfirmed.
var errUnconfirmed = fmt.Errorf("%w: jetstream: a timeline batch was not acknowledged within %v", job.ErrUnavailable, maxUnconfirmed)

// settleLocked waits until every published batch is stored.
func (p *Publisher) settleLocked(ctx context.Context) error {
	for p.sent != nil && p.err == nil {
		b := p.sent
		if err := b.failed; err != nil {
			b.failed = nil
			p.retryLocked(ctx, err)
			continue
		}
		t := time.NewTimer(time.Until(b.first.Add(maxUnconfirmed)))
		select {
		case <-b.ack.Ok():
			p.sent = nil
		case err := <-b.ack.Err():
			p.retryLocked(ctx, err)
		case <-ctx.Done():
			p.sent = nil
			p.fail(ctx.Err())
		case <-t.C:
			p.sent = nil
			p.fail(errUnconfirmed)
		}
		t.Stop()
	}
	return p.err
}

// Flush publishes the batch and waits until every batch is stored. A
// pair's terminal does this itself; Flush is for a timeline that stops
// without one.
func (p *Publisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n > 0 {
		p.flushLocked(ctx)
	}
	return p.settleLocked(ctx)
}

// Events yields the pair's timeline after the cursor, in sequence, each
// event once: what the stream holds, then what it receives, until the
// pair's terminal, ctx's end or an error (ErrGap when an event after the
// cursor is gone). A batch stored twice, or an event before the cursor,
// is skipped, and so is every message of a superseded attempt of the
// job stored after a newer attempt's first message. With follow false
// it stops at the last event stored.
func (b *Backend) Events(ctx context.Context, pairID string, after uint64, follow bool) iter.Seq2[eventlog.Event, error] {
	return func(yield func(eventlog.Event, error) bool) {
		if err := id.Check("pair.id", pairID); err != nil {
			yield(eventlog.Event{}, err)
			return
		}
		cur := timelineCursor{after: after}
		stopped := false
		err := b.readSubject(ctx, b.eventsSubject(pairID), 0, follow, func(msg jetstream.Msg, _ *jetstream.MsgMetadata) (bool, error) {
			evs, done, err := cur.take(msg)
			if err != nil {
				return false, err
			}
			for _, e := range evs {
				if !yield(e, nil) {
					stopped = true
					return false, nil
				}
			}
			return !done, nil
		})
		if err != nil && !stopped {
			yield(eventlog.Event{}, err)
		}
	}
}

// timelineCursor is where a reader of a pair's timeline stands.
type timelineCursor struct {
	after uint64 // the last event read, or the reader's cursor
	// Every message counts for the attempts, those before the cursor
	// too: a cursor is a sequence, not a message.
	seen attempts
}

// take reads the events of msg after the cursor, and moves the cursor to
// the last. done says that the pair's terminal is at or before the
// cursor: nothing follows.
func (c *timelineCursor) take(msg jetstream.Msg) (evs []eventlog.Event, done bool, err error) {
	stale, err := c.seen.superseded(msg.Headers())
	if err != nil || stale {
		return nil, false, err
	}
	all, err := decodeBatch(msg.Data())
	if err != nil {
		return nil, false, err
	}
	for _, e := range all {
		switch {
		case e.Seq() <= c.after && orchestrator.Terminal(e.Kind()):
			return nil, true, nil // the cursor is at the terminal
		case e.Seq() <= c.after:
			continue
		case e.Seq() > c.after+1:
			return nil, false, ErrGap
		}
		c.after = e.Seq()
		evs = append(evs, e)
		if orchestrator.Terminal(e.Kind()) {
			return evs, true, nil
		}
	}
	return evs, false, nil
}

// readerIdle is how long the server keeps a read's consumer that its
// reader could not delete (its connection was lost, its process died);
// a read that ends deletes its own.
const readerIdle = 30 * time.Second

// dropWait bounds the deletion of a read's consumer.
const dropWait = 2 * time.Second

// readSubject calls fn with each message of subject from stream sequence
// from (0: the first) in stream order, until fn says to stop or returns
// an error, ctx ends, or, with follow false, the subject's last message
// is read. Without follow, a subject without a message is
// job.ErrNotFound and one without a message from from on is read as
// empty. It reads through a consumer of its own, which it deletes when
// it returns: reads leave nothing behind on the server, and the events
// stream bounds how many are under way (MaxEventReaders).
func (b *Backend) readSubject(ctx context.Context, subject string, from uint64, follow bool, fn func(jetstream.Msg, *jetstream.MsgMetadata) (bool, error)) error {
	if !follow {
		last, err := b.events.GetLastMsgForSubject(ctx, subject)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return job.ErrNotFound
		}
		if err != nil {
			return err
		}
		if last.Sequence < from {
			return nil
		}
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, InactiveThreshold: readerIdle}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := b.events.OrderedConsumer(ctx, cfg)
	if err != nil {
		return err
	}
	defer b.dropConsumer(ctx, cons)
	it, err := cons.Messages(jetstream.PullMaxMessages(64))
	if err != nil {
		return err
	}
	defer it.Stop()
	stop := context.AfterFunc(ctx, it.Stop)
	defer stop()
	for {
		msg, err := it.Next()
		if err != nil {
			if ctx.Err() != nil {
				err = ctx.Err()
			}
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return err
		}
		if more, err := fn(msg, meta); err != nil || !more {
			return err
		}
		if !follow && meta.NumPending == 0 {
			return nil
		}
	}
}

// dropConsumer deletes the consumer of a read that has ended. One it
// cannot delete goes after readerIdle.
func (b *Backend) dropConsumer(ctx context.Context, cons jetstream.Consumer) {
	info := cons.CachedInfo()
	if info == nil || b.up() != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropWait)
	defer cancel()
	_ = b.js.DeleteConsumer(ctx, info.Stream, info.Name)
}

// decodeBatch reads an events message: events' canonical JSON, one a
// line, in consecutive sequence.
func decodeBatch(data []byte) ([]eventlog.Event, error) {
	if len(data) > maxPayload {
		return nil, ErrBadBatch
	}
	var evs []eventlog.Event
	for len(data) > 0 {
		line, rest, ok := bytes.Cut(data, []byte{'\n'})
		if !ok {
			return nil, ErrBadBatch
		}
		data = rest
		e, err := eventlog.Decode(line)
		if err != nil {
			return nil, ErrBadBatch
		}
		if n := len(evs); n > 0 && e.Seq() != evs[n-1].Seq()+1 {
			return nil, ErrBadBatch
		}
		evs = append(evs, e)
	}
	if len(evs) == 0 {
		return nil, ErrBadBatch
	}
	return evs, nil
}
