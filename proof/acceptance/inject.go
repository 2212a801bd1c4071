package acceptance

import (
	"bytes"
	"context"
	"fmt"
	"sync/atomic"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/tools"
)

// CancelAt is a required timeline observer that cancels the pair's context
// as soon as the timeline has committed event seq: the cancellation lands
// exactly at the boundary after it.
type CancelAt struct {
	Seq    uint64
	cancel atomic.Pointer[context.CancelFunc]
	fired  atomic.Bool
}

// Bind is Config.Cancel.
func (c *CancelAt) Bind(f context.CancelFunc) { c.cancel.Store(&f) }

// Observe cancels at Seq.
func (c *CancelAt) Observe(_ context.Context, e eventlog.Event) error {
	if e.Seq() == c.Seq {
		if f := c.cancel.Load(); f != nil {
			c.fired.Store(true)
			(*f)()
		}
	}
	return nil
}

// Fired reports whether the cancellation was injected.
func (c *CancelAt) Fired() bool { return c.fired.Load() }

// PanicProvider panics in the At-th model operation of the pair (counted
// over both workers, from 1), after its first item: mid-stream.
type PanicProvider struct {
	At int64
	n  atomic.Int64
}

// Wrap is Config.Provider.
func (pp *PanicProvider) Wrap(_ string, p model.Provider) model.Provider {
	return panicProvider{pp: pp, inner: p}
}

type panicProvider struct {
	pp    *PanicProvider
	inner model.Provider
}

func (p panicProvider) Stream(ctx context.Context, req model.Request) (model.Stream, error) {
	s, err := p.inner.Stream(ctx, req)
	if err != nil {
		return s, err
	}
	return &panicStream{inner: s, armed: p.pp.n.Add(1) == p.pp.At}, nil
}

type panicStream struct {
	inner model.Stream
	armed bool
	items int
}

func (s *panicStream) Recv() (model.Item, error) {
	if s.armed && s.items == 1 {
		panic("proof: injected provider panic (sk-proof-SECRET-4b1f9c must not leak)")
	}
	s.items++
	return s.inner.Recv()
}

func (s *panicStream) Close() error { return s.inner.Close() }

// PanicTool makes the At-th fs.write call of the pair panic after the
// file was written: the effect happened, the tool never returned.
type PanicTool struct {
	At int64
	n  atomic.Int64
}

// Wrap is Config.Tool.
func (pt *PanicTool) Wrap(t tool.Tool) tool.Tool {
	if t.Definition().Name() != tools.NameFSWrite {
		return t
	}
	return panicTool{pt: pt, inner: t}
}

type panicTool struct {
	pt    *PanicTool
	inner tool.Tool
}

func (t panicTool) Definition() tool.Definition { return t.inner.Definition() }

func (t panicTool) Execute(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
	res, err := t.inner.Execute(ctx, call, r)
	if t.pt.n.Add(1) == t.pt.At {
		panic("proof: injected tool panic")
	}
	return res, err
}

// CheckCancelled holds a pair cancelled at the boundary after event seq to
// K15, K24 and O6: the timeline passes CheckTimeline (one terminal per
// lifecycle, one pair terminal, no call re-run), the pair ended cancelled
// unless every run had already ended, and no run started after the
// cancellation.
func CheckCancelled(p *Played, seq uint64) error {
	s, err := CheckTimeline(p.Subscribed)
	if err != nil {
		return fail(PartCancel, "cancelled after event %d: %v", seq, err)
	}
	for _, at := range s.RunStarts {
		if at > seq {
			return fail(PartCancel, "cancelled after event %d, a run started at %d", seq, at)
		}
	}
	switch {
	case s.Reason == "cancelled" && p.Result.Reason == orchestrator.ReasonCancelled:
	case seq >= s.LastRunEnd && s.Reason == "approved":
		// Every run had ended: the pair's approval was already decided.
	default:
		return fail(PartCancel, "cancelled after event %d, the pair ended %s (%s), result %s", seq, s.Terminal, s.Reason, p.Result.Reason)
	}
	return nil
}

// CheckPanicked holds a pair whose provider or tool panicked to K25 and
// O5: one terminal per lifecycle and for the pair, which ended
// worker_failed; a panicking fs.write ended uncertain (uncertain calls)
// and was never run again; the panic's text is in no event.
func CheckPanicked(p *Played, what string, uncertain int) error {
	s, err := CheckTimeline(p.Subscribed)
	if err != nil {
		return fail(PartPanic, "%s: %v", what, err)
	}
	if s.Reason != "worker_failed" || p.Result.Reason != orchestrator.ReasonWorkerFailed {
		return fail(PartPanic, "%s: the pair ended %s (%s), want worker_failed", what, s.Terminal, s.Reason)
	}
	if len(s.Uncertain) != uncertain {
		return fail(PartPanic, "%s: %d tool calls ended uncertain, want %d", what, len(s.Uncertain), uncertain)
	}
	for _, secret := range []string{"injected", WriterKey} {
		if bytes.Contains(p.Subscribed, []byte(secret)) {
			return fail(PartPanic, "%s: the panic's text %q reached the timeline", what, secret)
		}
	}
	return nil
}

// String names an injection for test output.
func (c *CancelAt) String() string { return fmt.Sprintf("cancel after event %d", c.Seq) }
