// Package pluginlog owns the plugin log of a pair: a log of its own in
// the store, named Name(pairID), beside the pair timeline, that records
// the plugin host's generation and lease events under the host's kinds
// (plan.activated, generation.draining, generation.drained,
// generation.forced, generation.dead, generation.restarted,
// candidate.failed, plugin.failed). A plan.activated names every
// generation (name, version, digest, path, PID) of the plan it activated,
// so that the plan ID of a run.started in the timeline leads to the
// plugin processes that served that run.
//
// It owns the log's name, its payload schema (Event, Generation) and its
// bound, the Recorder that holds the host's events and appends them at
// flush points, and Read, which reads a recorded log back.
//
// It must not change the pair timeline's kinds or bytes, launch or manage
// plugins (that is plugins/host's), print, or decide exit codes: how
// `runs show` draws the log is the command line's.
package pluginlog
