// Package jobworker is the composition root of `spice-orch worker`: it
// connects to NATS, opens the JetStream job backend, and plays the pair
// jobs it fetches, each built from its spec by a remotespec.Builder (so
// a job's spec gets the same refusals as a spec sent over HTTP), with
// its timeline recorded in the given store, if any, and published to the
// events stream. A job delivered again after it started is resumed from the
// store's record of its pair when the store holds it (workers sharing a
// store), and otherwise from the pair's timeline on the events stream;
// the continuation is published to the same stream. When its context
// ends it drains within Config.Drain.
//
// It must not parse flags, decide exit codes, open the store or choose
// its paths (the caller hands it the store and the data directory), or
// know the job backend's wire format (that is jetstream's).
package jobworker
