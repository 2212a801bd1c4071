// Package observerkit owns a conformance kit for required observers: a
// function the author of a durable observer (a store, an outbox, an audit
// sink) calls from a test to check it against the kernel's observer
// contracts, K16, K17 and K26, through a real kernel eventlog.Log.
//
//	func TestConformance(t *testing.T) {
//		observerkit.Run(t, observerkit.Config{
//			New:      func(t *testing.T) (eventlog.Observer, observerkit.Recorded) { ... },
//			Blocked:  func(t *testing.T) (eventlog.Observer, func()) { ... },
//			Refusing: func(t *testing.T) eventlog.Observer { ... },
//		})
//	}
//
// What it checks:
//   - ordering (K16): every event the observer acknowledged (Observe
//     returned nil) is recorded, in sequence order and byte for byte (its
//     canonical JSON), and nothing else is; also for two logs appending
//     at once into one observer;
//   - backpressure and context (K17): an observer that cannot make an event
//     durable blocks the append, and returns promptly with its context's
//     error (errors.Is) once the context ends, so the log reports an
//     *eventlog.ObserverError; the event stays committed, and the next
//     event, once the observer is free again, is recorded;
//   - durability errors (K26): under the finalization context the engine
//     uses (not cancellable by the caller, with a deadline) a blocked
//     observer gives up with context.DeadlineExceeded within the bound,
//     and an observer whose storage refuses writes never acknowledges: it
//     returns an error, so no event is reported durable that is not.
//
// Recorded reads back what the observer made durable for one log. This
// package must not depend on any store, provider or tool: it knows
// observers only through kernel/eventlog.
package observerkit
