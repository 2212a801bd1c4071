// Package deadline ends many contexts at their deadlines with one timer,
// where context.WithTimeout arms a timer for each.
//
// A plugin call lives for microseconds and its bound is a minute: arming,
// then stopping, one runtime timer per call costs more than the call's own
// work, because a timer that becomes the earliest of its P wakes the
// network poller or an idle thread. A Watch keeps one timer for the
// earliest deadline it holds and does not touch it when a call ends early,
// so calls that follow one another arm nothing at all.
//
// It must not know about plugins, gRPC or tools.
package deadline
