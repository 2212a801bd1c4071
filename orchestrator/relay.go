package orchestrator

import (
	"context"
	"errors"
	"io"

	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
)

// relay copies one worker's run events into the pair timeline: as an
// engine observer (Live) or from the finished run's log (AfterRun).
type relay struct {
	p    *Pair
	role *string // the role in its pair's settings, which relayed events share
	// slab is own (Live), or the pair's slab shared by both relays
	// (AfterRun, where only the pair goroutine relays), so that the
	// second run of a relay can fill the first run's block.
	slab *slab
	own  slab
	self [1]eventlog.Observer // Live: the relay, as its engine's observers
	hint int                  // events expected from the current run; 0 if unknown
	head *relayHead           // the run of the last relayed event; nil before the pair's first
}

// Observe relays e. Its error fails the run (K16), and the pair ends with
// ReasonInfrastructure.
func (r *relay) Observe(ctx context.Context, e eventlog.Event) error {
	return r.relay(ctx, &e)
}

// relay is Observe without the copy of e.
func (r *relay) relay(ctx context.Context, e *eventlog.Event) error {
	if _, ok := e.Payload().(event.ToolStarted); ok {
		r.p.toolCalls.Add(1)
	}
	_, err := r.p.log.Append(ctx, eventlog.Record{
		Kind:     e.Kind(),
		Time:     e.Time(),
		Terminal: event.Terminal(e.Kind()),
		// The engine names each run's log by its run ID, so every event
		// says which run it belongs to, even when run.started was evicted.
		Payload: r.slab.relay(r.headOf(e), e, r.hint),
	})
	if err != nil {
		r.p.fail(err)
	}
	return err
}

// headOf returns the head of the run that committed e, made at its first
// event.
func (r *relay) headOf(e *eventlog.Event) *relayHead {
	if run := id.Run(e.Log()); r.head == nil || run != r.head.runID {
		r.head = r.p.newHead(r.role, run)
	}
	return r.head
}

// newHead returns a head for a run of the pair: one of the two the pair
// makes at its first, which are all a relay needs, or a new one. The
// pair's relays take turns, as its runs do, so they never call it at once.
func (p *Pair) newHead(worker *string, run id.Run) *relayHead {
	if p.heads == nil {
		p.heads = new([2]relayHead)
	}
	var h *relayHead
	if int(p.nheads) < len(p.heads) {
		h = &p.heads[p.nheads]
		p.nheads++
	} else {
		h = new(relayHead) // a review loop's third run and after
	}
	*h = relayHead{worker: worker, runID: run, fixed: relayedFixed(*worker, run)}
	return h
}

// fail records the first infrastructure failure of the pair's relay. It
// takes err by value and is not inlined, so that only a failure moves an
// error to the heap, not every call of its callers.
//
//go:noinline
func (p *Pair) fail(err error) {
	p.failure.CompareAndSwap(nil, &err)
}

// copyRun relays a finished run's events (AfterRun delivery); last is the
// run's last sequence.
func (p *Pair) copyRun(w int, r *engine.Run, last uint64) {
	bg := context.Background()
	sub, err := r.Subscribe(bg, 0)
	if err != nil {
		if oor := (*eventlog.OutOfRangeError)(nil); errors.As(err, &oor) {
			// The run's log evicted its oldest events: relay what is left.
			sub, err = r.Subscribe(bg, oor.Recovery)
		}
	}
	if err != nil {
		p.fail(err)
		return
	}
	defer sub.Close()
	ctx := p.appendCtx
	if p.observed {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.FinalizeTimeout)
		defer cancel()
	}
	rl := &p.crew.relays[w]
	// A relay's second run is expected to be about as long as its first:
	// make the first block room for both.
	next := uint64(0)
	if p.cfg.Pattern == Relay && p.runs == 1 {
		next = last
	}
	// Room for every event of the run (and the next run's), should the
	// slab need a block.
	rl.hint = int(last + next)
	defer func() { rl.hint = 0 }()
	for {
		e, err := sub.Next(bg)
		if err == io.EOF {
			return
		}
		if err != nil {
			p.fail(err)
			return
		}
		if err := rl.relay(ctx, &e); err != nil {
			// An observer's refusal leaves the event committed (K16):
			// keep relaying so that the run's lifecycles stay whole.
			var oe *eventlog.ObserverError
			if !errors.As(err, &oe) {
				return
			}
		}
	}
}

// Envelope of a kernel event, as eventlog documents it:
// {"seq":N,"kind":"…","time":"<TimeLayout>","payload":{…}}.
const envelopeFixed = len(`{"seq":`) + len(`,"kind":`) + len(`,"time":"`) + len(eventlog.TimeLayout) + len(`","payload":`) + 1

// slab hands out relayed slots from blocks, so relaying costs one
// allocation per block rather than one per event. A block stays alive while
// the timeline retains any event in it.
type slab struct{ free []relayed }

const maxBlock = 64

// relay wraps a committed run event. hint is how many more events are
// expected (0 if unknown). The payload's length is read off the event's
// encoded size, which the run log has measured already, so the timeline's
// byte bound costs no second measurement.
func (s *slab) relay(head *relayHead, e *eventlog.Event, hint int) Relayed {
	if len(s.free) == 0 {
		n := min(max(hint, 8), maxBlock)
		s.free = make([]relayed, n)
	}
	r := &s.free[0]
	s.free = s.free[1:]
	// A kind is a bound.Name, which JSON never escapes: its encoded
	// length is its length and two quotes, as the log measured it. The
	// run sequence is as long in the Relayed as the sequence was in the
	// envelope.
	size := e.EncodedLen() - envelopeFixed - len(e.Kind()) - 2
	if size-eventlog.UintLen(e.Seq()) < 2 {
		size = 0 // not an envelope this package knows: measure instead
	} else {
		size += head.fixed
	}
	*r = relayed{head: head, runSeq: e.Seq(), payload: e.Payload(), size: int32(size)}
	return Relayed{r}
}
