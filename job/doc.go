// Package job is the job model that every job backend shares: what a pair
// job is (its ID, its attempt and its spec), the states it goes through,
// what a worker reports about an attempt, and the Backend interface that
// serve, the command line and hosts use whichever backend runs the jobs —
// the in-process scheduler or a fleet of workers on JetStream.
//
// It owns values only. It must not know a transport, a store, a pair's
// configuration or how a backend keeps its jobs: a spec is bytes a worker
// turns into a pair, and a report carries a reason and an error message,
// not a Go error, so that it can cross a process boundary unchanged.
package job
