package observerkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

func violation(format string, args ...any) error {
	return fmt.Errorf("observerkit: "+format, args...)
}

var logs atomic.Int64

// newLog returns a log with obs as its only required observer, under a
// name no other scenario uses.
func newLog(obs eventlog.Observer) (*eventlog.Log, string, error) {
	name := fmt.Sprintf("kit-log-%d", logs.Add(1))
	l, err := eventlog.New(eventlog.Config{
		Name: name, MaxEvents: 4 * Events, MaxBytes: 1 << 20,
		ReserveEvents: 2, ReserveBytes: 4 << 10, Required: []eventlog.Observer{obs},
	})
	return l, name, err
}

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func record(i int, terminal bool) eventlog.Record {
	kind := "kit.note"
	if terminal {
		kind = "kit.ended"
	}
	p, err := eventlog.NewRaw(fmt.Appendf(nil, `{"i":%d,"text":"event \"%d\" of the kit"}`, i, i))
	if err != nil {
		panic(err) // constant shape
	}
	return eventlog.Record{Kind: kind, Time: epoch.Add(time.Duration(i) * time.Millisecond), Terminal: terminal, Payload: p}
}

// within runs f and waits at most d, containing a panic.
func within(d time.Duration, what string, f func() error) (err, v error) {
	ch := make(chan [2]error, 1)
	go func() {
		var r [2]error
		defer func() {
			if p := recover(); p != nil {
				r[1] = violation("%s panicked: %v", what, p)
			}
			ch <- r
		}()
		r[0] = f()
	}()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case r := <-ch:
		return r[0], r[1]
	case <-timer.C:
		return nil, violation("%s did not return within %v", what, d)
	}
}

// appendAll appends n events to l and returns the bytes of those the
// observer acknowledged.
func appendAll(l *eventlog.Log, n int, o options) ([][]byte, error) {
	var acked [][]byte
	for i := range n {
		var e eventlog.Event
		err, v := within(o.wait, "Observe", func() error {
			var err error
			e, err = l.Append(context.Background(), record(i+1, i == n-1))
			return err
		})
		if v != nil {
			return nil, v
		}
		if err != nil {
			return nil, violation("K16: the observer refused event %d of a healthy log: %v", i+1, err)
		}
		acked = append(acked, e.AppendJSON(nil))
	}
	return acked, nil
}

// compare holds what was recorded for log to what was acknowledged.
func compare(rec Recorded, log string, acked [][]byte, o options) error {
	var got [][]byte
	err, v := within(o.wait, "Recorded", func() error {
		var err error
		got, err = rec(context.Background(), log)
		return err
	})
	if v != nil {
		return v
	}
	if err != nil {
		return violation("reading log %s back: %v", log, err)
	}
	for i, a := range acked {
		if i >= len(got) {
			return violation("K16: log %s: acknowledged event %d of %d was not recorded", log, i+1, len(acked))
		}
		if !bytes.Equal(got[i], a) {
			return violation("K16: log %s: recorded event %d is not the acknowledged one:\nrecorded: %s\nacked:    %s", log, i+1, got[i], a)
		}
	}
	if len(got) != len(acked) {
		return violation("K16: log %s: %d events recorded, %d acknowledged", log, len(got), len(acked))
	}
	return nil
}

func checkOrdering(obs eventlog.Observer, rec Recorded, o options) error {
	l, name, err := newLog(obs)
	if err != nil {
		return err
	}
	acked, err := appendAll(l, Events, o)
	if err != nil {
		return err
	}
	return compare(rec, name, acked, o)
}

func checkTwoLogs(obs eventlog.Observer, rec Recorded, o options) error {
	var (
		names [2]string
		acked [2][][]byte
		errs  [2]error
		wg    sync.WaitGroup
	)
	for i := range 2 {
		l, name, err := newLog(obs)
		if err != nil {
			return err
		}
		names[i] = name
		wg.Go(func() { acked[i], errs[i] = appendAll(l, Events, o) })
	}
	wg.Wait()
	if err := errors.Join(errs[:]...); err != nil {
		return err
	}
	for i := range 2 {
		if err := compare(rec, names[i], acked[i], o); err != nil {
			return err
		}
	}
	return nil
}

// checkBackpressure appends to a blocked observer: the append must block
// until its context ends and then fail with the context's error; after
// release the next event is recorded.
func checkBackpressure(obs eventlog.Observer, rec Recorded, release func(), o options) error {
	defer release()
	l, name, err := newLog(obs)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(ctx, record(1, false))
		done <- err
	}()
	// The observer cannot finish while blocked: the append either is still
	// waiting (backpressure) or failed; it must not have succeeded.
	select {
	case err := <-done:
		cancel()
		if err == nil {
			return violation("K17: a blocked observer acknowledged an event it could not make durable")
		}
		return violation("K17: a blocked observer failed at once instead of applying backpressure: %v", err)
	default:
	}
	cancel()
	timer := time.NewTimer(o.prompt)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		return violation("K17: the observer did not return within %v of its context's end", o.prompt)
	}
	var oe *eventlog.ObserverError
	if !errors.As(err, &oe) || !errors.Is(err, context.Canceled) {
		return violation("K17: after its context ended the observer returned %v, want the context's error", err)
	}
	release()
	e, err := l.Append(context.Background(), record(2, true))
	if err != nil {
		return violation("K16: once free again the observer refused the next event: %v", err)
	}
	if e.Seq() != 2 {
		return violation("K16: the refused event's sequence was reused (next is %d)", e.Seq())
	}
	var got [][]byte
	err, v := within(o.wait, "Recorded", func() error {
		var err error
		got, err = rec(context.Background(), name)
		return err
	})
	if v != nil {
		return v
	}
	if err != nil {
		return violation("reading log %s back: %v", name, err)
	}
	if len(got) == 0 || !bytes.Equal(got[len(got)-1], e.AppendJSON(nil)) {
		return violation("K16: the event acknowledged after the blocked one was not recorded last")
	}
	return nil
}

// checkDeadline observes with the engine's finalization context: not
// cancellable by the caller, with a deadline.
func checkDeadline(obs eventlog.Observer, o options) error {
	l, _, err := newLog(eventlog.ObserverFunc(func(context.Context, eventlog.Event) error { return nil }))
	if err != nil {
		return err
	}
	e, err := l.Append(context.Background(), record(1, true))
	if err != nil {
		return err
	}
	caller, cancel := context.WithCancel(context.Background())
	cancel()
	fctx, stop := context.WithTimeout(context.WithoutCancel(caller), o.prompt/10)
	defer stop()
	err, v := within(o.prompt, "Observe", func() error { return obs.Observe(fctx, e) })
	if v != nil {
		return violation("K26: a blocked observer did not give up within %v under a finalization deadline of %v", o.prompt, o.prompt/10)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		return violation("K26: a blocked observer under a finalization deadline returned %v, want context.DeadlineExceeded", err)
	}
	return nil
}

func checkRefusing(obs eventlog.Observer, o options) error {
	l, _, err := newLog(obs)
	if err != nil {
		return err
	}
	var e eventlog.Event
	err, v := within(o.wait, "Observe", func() error {
		var err error
		e, err = l.Append(context.Background(), record(1, true))
		return err
	})
	if v != nil {
		return v
	}
	var oe *eventlog.ObserverError
	if err == nil || !errors.As(err, &oe) {
		return violation("K26: an observer whose storage refuses writes acknowledged event %d", e.Seq())
	}
	return nil
}
