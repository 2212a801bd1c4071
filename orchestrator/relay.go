package orchestrator

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// timeline is the pair timeline (O7): its log, how its events are written,
// and the memory its relayed events live in.
type timeline struct {
	log *eventlog.Log
	cfg *settings
	// appendCtx is the caller's context without its cancellation: pair
	// events the pair decided to write are written even after a cancel.
	// An unobserved timeline, whose appends cannot block, uses Background.
	appendCtx context.Context
	observed  bool // the timeline has observers, which may block
	mem       relayMemory
	failure   atomic.Pointer[error] // the first failure to relay a run event
	after     uint64                // the recorded sequence a resumed timeline continues
	toolCalls atomic.Int64          // tool.started events relayed
}

func (t *timeline) open(ctx context.Context, tc *TimelineConfig, pairID string, cfg *settings) error {
	lc := tc.logConfig()
	lc.Capacity = timelineCapacity(cfg.Pattern)
	lc.Name = pairID // so observers shared by many logs (a store) file it under the pair
	lc.After = t.after
	log, err := eventlog.New(lc)
	if err != nil {
		return err
	}
	t.log, t.cfg = log, cfg
	t.observed = len(tc.Required)+len(tc.BestEffort) > 0
	// Without observers the log ignores an append's context and a lease's
	// release needs only one that is never cancelled: Background serves,
	// without a wrapper per pair.
	t.appendCtx = context.Background()
	if t.observed {
		t.appendCtx = context.WithoutCancel(ctx)
	}
	return nil
}

// bound returns the context for one stretch of timeline appends: bounded
// by FinalizeTimeout when observers may block them.
func (t *timeline) bound() (context.Context, context.CancelFunc) {
	if !t.observed {
		return t.appendCtx, func() {}
	}
	return context.WithTimeout(t.appendCtx, t.cfg.FinalizeTimeout)
}

// emit appends one pair event.
func (t *timeline) emit(pl interface {
	eventlog.Payload
	Kind() string
}) error {
	ctx, cancel := t.bound()
	defer cancel()
	_, err := t.log.Append(ctx, eventlog.Record{Kind: pl.Kind(), Time: t.now(), Payload: pl})
	return err
}

// end appends the pair terminal and closes the timeline. It returns the
// terminal's sequence, for a DurabilityError.
func (t *timeline) end(ctx context.Context, ended Ended) (uint64, error) {
	ev, err := t.log.Append(ctx, eventlog.Record{Kind: ended.Kind(), Time: t.now(), Terminal: true, Payload: ended})
	_ = t.log.Close(ctx)
	return ev.Seq(), err
}

// now reads the injected clock, containing its panics.
func (t *timeline) now() (tm time.Time) {
	defer func() {
		if recover() != nil {
			tm = time.Unix(0, 0).UTC()
		}
	}()
	return t.cfg.Clock.Now()
}

// relay appends run event e of worker w to the timeline. An error fails the
// pair with ReasonInfrastructure; as an observer's error it also fails the
// run (K16).
func (t *timeline) relay(ctx context.Context, w int, e *eventlog.Event, hint int) error {
	if _, ok := e.Payload().(event.ToolStarted); ok {
		t.toolCalls.Add(1)
	}
	_, err := t.log.Append(ctx, eventlog.Record{
		Kind:     e.Kind(),
		Time:     e.Time(),
		Terminal: event.Terminal(e.Kind()),
		Payload:  t.mem.relayed(&t.cfg.Roles[w], e, hint),
	})
	if err != nil {
		t.fail(err)
	}
	return err
}

// fail records the first failure to relay a run event.
func (t *timeline) fail(err error) { t.failure.CompareAndSwap(nil, &err) }

// relay is the observer (Live delivery) on one worker's engine: it relays
// each run event, as its run commits it, to the timeline of the pair the
// crew is lent to.
type relay struct {
	c *crew
	w int // the worker
}

func (r *relay) Observe(ctx context.Context, e eventlog.Event) error {
	return r.c.pair.tl.relay(ctx, r.w, &e, 0)
}

// copyRun relays a finished run's events (AfterRun delivery); last is the
// run's last sequence.
func (p *Pair) copyRun(w int, r *engine.Run, last uint64) {
	bg := context.Background()
	sub, err := r.Subscribe(bg, 0)
	if oor, ok := errors.AsType[*eventlog.OutOfRangeError](err); ok {
		// The run's log evicted its oldest events: relay what is left.
		sub, err = r.Subscribe(bg, oor.Recovery)
	}
	if err != nil {
		p.tl.fail(err)
		return
	}
	defer sub.Close()
	ctx, cancel := p.tl.bound()
	defer cancel()
	// A relay's second run is expected to be about as long as its first:
	// a block made for the first has room for both.
	more := 0
	if p.cfg.Pattern == Relay && p.prog.runs == 1 {
		more = int(last)
	}
	for {
		e, err := sub.Next(bg)
		if err == io.EOF {
			return
		}
		if err != nil {
			p.tl.fail(err)
			return
		}
		if err := p.tl.relay(ctx, w, &e, int(last-e.Seq()+1)+more); err != nil {
			// An observer's refusal leaves the event committed (K16):
			// keep relaying so that the run's lifecycles stay whole.
			if _, ok := errors.AsType[*eventlog.ObserverError](err); !ok {
				return
			}
		}
	}
}

// relayMemory is where one pair's relayed events live, and the one place
// that economizes on it: slots come from blocks, so relaying costs an
// allocation per block rather than one per event, and every event of a run
// shares one head, made two at a time (a relay's two runs, a review
// round's). A block stays alive while anything keeps an event in it; it
// holds no other pair's events and nothing points from it to the pair, so
// keeping relayed events keeps no pair alive.
//
// The pair relays one run at a time, so it is never used concurrently.
type relayMemory struct {
	free  []relayed
	heads []relayHead // made and not yet used
	head  *relayHead  // the run of the last relayed event
}

const maxBlock = 64

// relayed is one relayed event, in a slot of a block.
type relayed struct {
	head    *relayHead // shared by every event relayed from the run
	runSeq  uint64
	payload eventlog.Payload
	size    int32 // the Relayed's EncodedLen when known, else 0; at most eventlog.MaxEventBytes
}

// relayHead is what every event relayed from one run shares: the worker's
// role, the run, and the encoded length of the two in the envelope (0 when
// unknown).
type relayHead struct {
	worker *string // the role in its pair's settings, held apart from any Pair or Team
	runID  id.Run
	fixed  int
}

// Envelope of a kernel event, as eventlog documents it:
// {"seq":N,"kind":"…","time":"<TimeLayout>","payload":{…}}.
const envelopeFixed = len(`{"seq":`) + len(`,"kind":`) + len(`,"time":"`) + len(eventlog.TimeLayout) + len(`","payload":`) + 1

// relayed wraps committed run event e of the worker whose role is worker.
// hint is how many events of the run are left, e included (0 if unknown).
// The payload's length is read off the event's encoded size, which the
// run log has measured already, so the timeline's byte bound costs no
// second measurement.
func (m *relayMemory) relayed(worker *string, e *eventlog.Event, hint int) Relayed {
	if run := id.Run(e.Log()); m.head == nil || m.head.runID != run {
		// The engine names each run's log by its run ID, so every event
		// says which run it belongs to, even when run.started was evicted.
		if len(m.heads) == 0 {
			m.heads = make([]relayHead, 2)
		}
		m.head = &m.heads[0]
		m.heads = m.heads[1:]
		*m.head = relayHead{worker: worker, runID: run, fixed: relayedFixed(*worker, run)}
	}
	if len(m.free) == 0 {
		m.free = make([]relayed, min(max(hint, 8), maxBlock))
	}
	r := &m.free[0]
	m.free = m.free[1:]
	// A kind is a bound.Name, which JSON never escapes: its encoded
	// length is its length and two quotes, as the log measured it. The
	// run sequence is as long in the Relayed as the sequence was in the
	// envelope.
	size := e.EncodedLen() - envelopeFixed - len(e.Kind()) - 2
	if size-eventlog.UintLen(e.Seq()) < 2 {
		size = 0 // not an envelope this package knows: measure instead
	} else {
		size += m.head.fixed
	}
	*r = relayed{head: m.head, runSeq: e.Seq(), payload: e.Payload(), size: int32(size)}
	return Relayed{r}
}
