// Package job is the job model that every job backend shares: what a pair
// job is (its ID, its attempt and its spec), the states it goes through,
// what a worker reports about an attempt, and the Backend interface that
// both backends implement — the in-process scheduler (Scheduler.Jobs) and
// a fleet of workers on JetStream — so that a host can treat either the
// same way. (The HTTP server plays pairs on the scheduler itself, or
// submits them to a queue built on this interface; the command line's
// worker plays job.Job values and answers with job.Report.) A backend
// that can lose its link to its jobs says so through Monitor and fails
// fast with ErrUnavailable meanwhile.
//
// It owns values only. It must not know a transport, a store, a pair's
// configuration or how a backend keeps its jobs: a spec is bytes a worker
// turns into a pair, and a report carries a reason and an error message,
// not a Go error, so that it can cross a process boundary unchanged.
package job
