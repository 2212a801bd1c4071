// Package jetstream is the job backend for a fleet of worker processes on
// NATS JetStream (D1, D2): serve submits pair jobs to a work-queue stream,
// workers anywhere play them, and job state lives in a key-value bucket
// that only compare-and-swap changes.
//
// It owns:
//
//   - the jobs stream: one message per job, its Nats-Msg-Id the job ID so
//     a resubmission within the duplicate window is dropped; a work queue,
//     so an acknowledged job leaves it;
//   - the workers' durable pull consumer: explicit ack, AckWait,
//     MaxDeliver; a worker fetches one job per free slot and sends
//     InProgress heartbeats at a third of AckWait while it plays;
//   - the state bucket: key s.<id> holds the job's status, created queued
//     by Submit and then changed only by Update with the revision last
//     read, so one writer wins each transition and a job gets exactly one
//     terminal state however often it is delivered (D1); key c.<id>
//     asks for cancellation, which the playing worker watches;
//   - the MAX_DELIVERIES advisory: a job delivered MaxDeliver times
//     without a terminal ends failed (job.ReasonMaxDeliveries) and its
//     message is deleted from the stream;
//   - an embedded server for one machine (StartEmbedded): NoSigs, no
//     logging, JetStream storage in a directory of the caller's.
//
// A job delivered again after it started is not played again: a worker
// does not resume a pair from its recorded timeline, so the job ends
// failed with reason job.ReasonInterrupted (D2: a pair is never re-run
// silently).
//
// Every stream and bucket has explicit limits (messages, bytes, age, value
// size), and publishing keeps a bounded number of acks in flight. The
// package must not know how a spec becomes a pair: a worker's PlayFunc
// does that.
package jetstream
