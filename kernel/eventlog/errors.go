package eventlog

import (
	"errors"
	"strconv"
)

var (
	// ErrClosed is returned by Append after Close.
	ErrClosed = errors.New("eventlog: log closed")
	// ErrSubscriptionClosed is returned by Next after the subscription's
	// Close.
	ErrSubscriptionClosed = errors.New("eventlog: subscription closed")
	// ErrOutOfRange matches every *OutOfRangeError.
	ErrOutOfRange = errors.New("eventlog: cursor out of range")
	// ErrExhausted matches every *ExhaustedError.
	ErrExhausted = errors.New("eventlog: subscription exhausted")
	// ErrObserverPanic is the cause of an *ObserverError whose observer
	// panicked. The panic value is not kept: it could hold a secret.
	ErrObserverPanic = errors.New("eventlog: observer panicked")
)

// OutOfRangeError is returned by Subscribe for a cursor outside the window
// the log can serve: older than the retained events (or than MaxLag allows),
// or after the last committed sequence.
type OutOfRangeError struct {
	// LastDelivered is the cursor the caller asked for: the last sequence it
	// says it has.
	LastDelivered uint64
	// Recovery is the cursor to subscribe with instead. For an old cursor the
	// events between LastDelivered and Recovery are gone; for a future cursor
	// it is the last committed sequence.
	Recovery uint64
}

func (e *OutOfRangeError) Error() string {
	return "eventlog: cursor " + strconv.FormatUint(e.LastDelivered, 10) +
		" out of range; recover from " + strconv.FormatUint(e.Recovery, 10)
}

// Is matches ErrOutOfRange.
func (e *OutOfRangeError) Is(target error) bool { return target == ErrOutOfRange }

// ExhaustReason says why a subscription was disconnected.
type ExhaustReason uint8

const (
	// Evicted: the next event the subscriber needed was evicted before it
	// read it.
	Evicted ExhaustReason = iota + 1
	// Lagged: the subscriber fell more than Config.MaxLag events behind.
	Lagged
)

func (r ExhaustReason) String() string {
	switch r {
	case Evicted:
		return "evicted"
	case Lagged:
		return "lagged"
	}
	return "reason(" + strconv.Itoa(int(r)) + ")"
}

// ExhaustedError ends a subscription that fell behind. The log never waits
// for a slow subscriber; it disconnects it with this error instead.
type ExhaustedError struct {
	Reason ExhaustReason
	// LastDelivered is the last sequence the subscription delivered (its
	// starting cursor if it delivered nothing).
	LastDelivered uint64
	// Recovery is the oldest cursor a new subscription may use now. Events
	// after LastDelivered and up to Recovery are lost to this subscriber.
	Recovery uint64
}

func (e *ExhaustedError) Error() string {
	return "eventlog: subscriber " + e.Reason.String() + " after " +
		strconv.FormatUint(e.LastDelivered, 10) + "; recover from " +
		strconv.FormatUint(e.Recovery, 10)
}

// Is matches ErrExhausted.
func (e *ExhaustedError) Is(target error) bool { return target == ErrExhausted }

// ObserverError reports that a required observer refused or failed on a
// committed event. The event keeps its sequence; the caller reports the
// failure with a later event.
type ObserverError struct {
	Seq      uint64 // the committed event's sequence
	Observer int    // index in Config.Required
	Err      error  // the observer's error, or ErrObserverPanic
}

func (e *ObserverError) Error() string {
	return "eventlog: required observer " + strconv.Itoa(e.Observer) +
		" failed on sequence " + strconv.FormatUint(e.Seq, 10) + ": " + e.Err.Error()
}

func (e *ObserverError) Unwrap() error { return e.Err }
