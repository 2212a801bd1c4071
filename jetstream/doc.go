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
//     asks for cancellation, which the playing worker hears through one
//     subscription to the cancel keys and reads once as it starts;
//   - the MAX_DELIVERIES advisory: a job delivered MaxDeliver times
//     without a terminal ends failed (job.ReasonMaxDeliveries) and its
//     message is deleted from the stream;
//   - the events stream: each pair's timeline on its own subject, in
//     messages that carry a batch of consecutive events (Timeline, a
//     required observer of the pair), each message's Nats-Msg-Id naming
//     the pair, the batch's range and the attempt of the job that
//     published it, so that a batch sent twice is stored once; Events
//     serves a pair's timeline from any cursor, replaying what the
//     stream holds and then tailing it to the pair's terminal, each
//     event once and without a gap (or ErrGap), and none that an
//     attempt published after a newer attempt's first message;
//   - the history a server reads (Pair, ListPairs): a job's status and
//     its timeline from the stream, in the store's read-side types, so
//     that serve reads either the same way;
//   - an embedded server for one machine (StartEmbedded): NoSigs, no
//     logging, JetStream storage in a directory of the caller's;
//   - the connection's life (Connect, Health): bounded reconnection, one
//     log record per loss and return with the URL's credentials
//     redacted, calls failing at once with job.ErrUnavailable while the
//     connection is down, and a reconnected worker, or one whose
//     heartbeats were late past half of AckWait, checking each job it
//     holds (a cancel put meanwhile, a delivery that took it over: on
//     another worker, or on another slot of this one, where each attempt
//     holds its own entry and the newer stops the older).
//
// A job delivered again after it started is never played from its start
// again (D2): the worker takes the new attempt by compare-and-swap and
// hands the job to WorkerConfig.Resume, which continues the pair from its
// recorded timeline. ResumeFromEvents does so from the events stream, on
// any machine: a Publisher returns from a tool.started only once it and
// every event before it are stored, so the stream holds every call that
// may have taken effect; the continuation is published to the same
// subject, its first batch fenced on the subject's last message, and
// what the superseded attempt publishes after it (a worker paused past
// AckWait, until its next heartbeat) is skipped by every reader.
// ResumeFromStore does so from a SQLite store that the worker shares with
// the one that stopped answering, and ResumeFromStoreOrEvents takes the
// store when it holds the pair and the stream otherwise, publishing
// either continuation. Without a Resume, or a record, the job ends failed
// with reason job.ReasonInterrupted.
//
// Every stream and bucket has explicit limits (messages, bytes, age, value
// size), and publishing keeps a bounded number of acks in flight: one
// batch at a time per pair timeline, published again with the same
// Nats-Msg-Id when a lost connection swallowed its ack. The
// package must not know how a spec becomes a pair: a worker's PlayFunc,
// and the BuildFunc given to ResumeFromStore, do that.
package jetstream
