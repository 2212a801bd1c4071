package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/scheduler"
)

// countedCtx is a slot context that counts what is registered on it. It
// is not a context.WithCancel (its Done channel is its own, so the context
// package does not take it for one), but it has an AfterFunc method: the
// context package then registers every context derived from it
// (WithCancel, WithTimeout, WithDeadline, AfterFunc, with or without a
// cause) through that method, and calls the stop it returned when the
// derived context is released. (A context derived through a wrapper
// that has neither, such as WithValue's, is watched by a goroutine of the
// context package instead, which this does not count.)
type countedCtx struct {
	parent context.Context
	done   chan struct{}

	mu     sync.Mutex
	unhook func() bool // its own registration on parent; nil until made
	err    error
	funcs  map[int]func() // registered and neither stopped nor run
	ever   int            // registrations made
}

func newCountedCtx(parent context.Context) *countedCtx {
	c := &countedCtx{parent: parent, done: make(chan struct{}), funcs: map[int]func(){}}
	// Of an ended parent, AfterFunc runs c.cancel on a goroutine before
	// it returns: its stop is stored, and read, under mu.
	unhook := context.AfterFunc(parent, c.cancel)
	c.mu.Lock()
	c.unhook = unhook
	c.mu.Unlock()
	if parent.Err() != nil {
		c.cancel() // as WithCancel of an ended parent: ended at once
	}
	return c
}

func (c *countedCtx) Deadline() (time.Time, bool) { return c.parent.Deadline() }
func (c *countedCtx) Done() <-chan struct{}       { return c.done }
func (c *countedCtx) Value(key any) any           { return c.parent.Value(key) }

func (c *countedCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc registers f to run when c is cancelled.
func (c *countedCtx) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		// The context package calls this holding the derived context's
		// lock, which f takes.
		go f()
		return func() bool { return false }
	}
	k := c.ever
	c.ever++
	c.funcs[k] = f
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		_, ok := c.funcs[k]
		delete(c.funcs, k)
		return ok
	}
}

// cancel ends c and runs what is registered on it, outside its lock: a
// derived context's cancel does not stop its registration (the context
// package passes removeFromParent false to its children).
func (c *countedCtx) cancel() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	funcs, unhook := c.funcs, c.unhook
	c.funcs = nil
	close(c.done)
	c.mu.Unlock()
	if unhook != nil { // nil: run by its registration, which has fired
		unhook()
	}
	for _, f := range funcs {
		f()
	}
}

// counts returns the registrations live on c and those ever made.
func (c *countedCtx) counts() (live, ever int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.funcs), c.ever
}

// slotContexts makes the slots' contexts and keeps them all.
type slotContexts struct {
	mu  sync.Mutex
	all []*countedCtx
}

func (s *slotContexts) make(parent context.Context) (context.Context, context.CancelFunc) {
	c := newCountedCtx(parent)
	s.mu.Lock()
	s.all = append(s.all, c)
	s.mu.Unlock()
	return c, c.cancel
}

// counts sums countedCtx.counts over every context made, and returns how
// many were made.
func (s *slotContexts) counts() (live, ever, made int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.all {
		l, e := c.counts()
		live, ever = live+l, ever+e
	}
	return live, ever, len(s.all)
}

// TestO8_PairsLeaveNothingOnTheirJobContext: whatever a pair derives from
// its job's context (engine runs, timeouts, AfterFuncs, subscriptions)
// must be released by the time the pair ends, or it would stay registered
// until the job's context is released and, with a host's long-lived
// context, pile up job after job. On one slot, jobs of every kind — on a
// Team or named, with tool rounds, with a required observer, behind the
// model-operation gate, cancelled — each play under a context of their
// own and leave nothing registered on it once they have ended.
func TestO8_PairsLeaveNothingOnTheirJobContext(t *testing.T) {
	// The counting itself: every way to derive a context registers on a
	// countedCtx, and releasing it stops the registration.
	probe := newCountedCtx(context.Background())
	_, cancel := context.WithCancel(probe)
	_, cancelCause := context.WithCancelCause(probe)
	_, cancelTimeout := context.WithTimeout(probe, time.Hour)
	stopAfter := context.AfterFunc(probe, func() {})
	live, ever := probe.counts()
	require.Equal(t, [2]int{4, 4}, [2]int{live, ever}, "derived contexts register on a countedCtx")
	cancel()
	cancelCause(nil)
	cancelTimeout()
	require.True(t, stopAfter())
	live, _ = probe.counts()
	require.Zero(t, live, "released contexts stop their registrations")
	probe.cancel()

	slots := &slotContexts{}
	s, err := scheduler.NewWithJobContext(scheduler.Config{Pairs: 1, ModelOps: 1, IDs: scheduler.Sequential("job-")}, slots.make)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Shutdown(context.Background())) })

	var toolCalls atomic.Int64
	echo := enginetest.Echo()
	counted := enginetest.Tool{Def: echo.Def, Fn: func(ctx context.Context, call tool.Call, r tool.Reporter) (tool.Result, error) {
		toolCalls.Add(1)
		return echo.Fn(ctx, call, r)
	}}
	echoPlans, err := enginetest.Plan("plan-1", counted)
	require.NoError(t, err)
	toolThenAnswer := func(answer string) *enginetest.Provider {
		p := enginetest.NewProvider(
			[]model.Item{enginetest.Call("call-1", "echo", `{"x":1}`), enginetest.Done(10, 5)},
			enginetest.Answer(answer))
		p.Cycle = true
		return p
	}
	plain := relay(t, cycling("Draft."), cycling("OK."))
	tools := relay(t, toolThenAnswer("Draft."), cycling("OK."))
	tools.Plans = echoPlans
	observed := relay(t, toolThenAnswer("Draft."), cycling("OK."))
	observed.Plans = echoPlans
	observed.Timeline.Required = []eventlog.Observer{eventlog.ObserverFunc(
		func(context.Context, eventlog.Event) error { return nil })}
	named := relay(t, toolThenAnswer("Draft."), cycling("OK."))
	named.Plans = echoPlans
	stuck := newHeld("Never answered.") // never released: its jobs are cancelled
	held := relay(t, stuck, cycling("OK."))

	const jobs = 200
	cancelled, withTools := 0, 0
	for i := range jobs {
		_, before, _ := slots.counts()
		var kind, jobID string
		want := scheduler.Completed
		switch i % 5 {
		case 0:
			kind, jobID = "plain", submit(t, s, plain)
		case 1:
			kind, jobID = "tools", submit(t, s, tools)
			withTools++
		case 2:
			kind, jobID = "observed", submit(t, s, observed)
			withTools++
		case 3:
			cfg := *named
			cfg.ID = fmt.Sprintf("named-%d", i)
			kind, jobID = "named", submit(t, s, &cfg)
			withTools++
		case 4:
			kind, jobID, want = "cancelled", submit(t, s, held), scheduler.Cancelled
			<-stuck.started
			require.NoError(t, s.Cancel(jobID))
			cancelled++
		}
		info := wait(t, s, jobID)
		require.Equal(t, want, info.State, "job %d (%s): %v", i, kind, info.Err)
		live, ever, made := slots.counts()
		require.Zero(t, live, "job %d (%s) left registrations on its slot's context", i, kind)
		require.Greater(t, ever, before, "job %d (%s) played under a counted context", i, kind)
		require.Equal(t, i+1, made, "one context per job")
	}
	require.Equal(t, int64(withTools), toolCalls.Load(), "one tool round per job with tools")
}

// TestCountedCtxOfAnEndedParent: a countedCtx made on an ended parent is
// ended at once, as WithCancel's would be. Its registration on the parent
// then runs its cancel on a goroutine of the context package, while
// newCountedCtx still stores the registration's stop: under -race, the two
// must not race. Several makers share the parent so that some of them
// wait on its lock and that goroutine runs first.
func TestCountedCtxOfAnEndedParent(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	cancel()
	const makers, each = 16, 500
	var live atomic.Int64
	var wg sync.WaitGroup
	for range makers {
		wg.Go(func() {
			for range each {
				c := newCountedCtx(parent)
				select {
				case <-c.Done():
				default:
					live.Add(1)
				}
				if c.Err() == nil {
					live.Add(1)
				}
			}
		})
	}
	wg.Wait()
	require.Zero(t, live.Load(), "countedCtxs of an ended parent not ended at once")
}
