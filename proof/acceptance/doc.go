// Package acceptance owns the boundary proof, the evidence that the kernel
// boundary holds (docs/architecture.md): one suite, TestBoundaryProof, in which a single pair — a
// writer and a reviewer in a review loop, built from the public packages
// (workers, orchestrator, tools, plugins/host, store, providers/openai,
// scheduler, server) with plain constructors — exercises the six parts the kernel
// boundary must carry without growing: the OpenAI-compatible provider over
// real HTTP against loopback servers that play transcripts written in
// OpenAI's, vLLM's and Ollama's wire formats and check every request they
// receive (key, `stream: true`, the leased plan's tools, the conversation
// with the handoff message and the tool results byte for byte); the
// compiled fs.write and the Go fixture plugin's echo (a runtime tool in
// its own process, pinned by SHA-256) in the pair's one leased plan, the
// plugin host's plan.Source; the SQLite store as the required observer of
// both workers and the timeline; the timeline's clients (the in-process
// subscriber, `runs replay --json`, and the serve API's SSE stream read by
// a plain HTTP client, with the server running the pair); and the
// two-worker review loop, approved after a rejected first draft. The same
// pair is then cancelled at every timeline boundary and panicked in its
// provider, its compiled tool and a plugin process; the writer's first
// run makes a snapshot round trip (suspended, resumed in a fresh engine,
// compared with the uninterrupted run); and the kernel is shown unchanged
// with archtest's own readings (proof/boundary).
//
// `make proof` writes what the suite measured to proof/LEDGER.md, also
// when the suite fails: every sentence of it is computed from the check
// it reports, a failed row carries the failure, and its tree line digests
// the files the proof compiles, embeds or reads (TestLedgerTree checks it).
// Without -ledger the suite fails when that file is stale.
//
// Every check returns a *PartError naming its part, and the TestBreak_
// tests break each part to show it. The package knows the parts only
// through their public APIs; it must not reach into internal packages or
// change the kernel.
package acceptance
