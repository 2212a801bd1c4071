// Package conformance is the host-owned plugin/v1 conformance suite (P8): a
// fixed, named list of cases that every plugin/v1 implementation must
// pass, whatever its language. It drives a plugin through the public
// protocol only (plugins/PROTOCOL.md and plugin.proto): launch and
// handshake, authentication, protocol negotiation, the manifest against
// the kernel's tool contracts, the outcomes of the tool profile below,
// cancellation, the call's own deadline, unknown fields, message bounds
// and shutdown.
//
// The suite reaches a plugin through two small interfaces: a Launcher
// starts one process and returns a Target (the process, its gRPC
// connection and the token that authenticates calls). ProcessLauncher,
// in launch.go, is the suite's own minimal launcher. The plugin host's
// launcher cannot stand behind Target: its connection authenticates every
// call, it offers only the host's protocol versions, and it judges the
// manifest itself, while cases must call without a token, offer 0 or 2,
// and report a bad manifest as a failed case. So the suite keeps this
// launcher, and the handshake line's parser, proof and token are
// plugins/handshake's (one parser for the protocol).
//
// # Tool profile
//
// The cases call these tools, which a conformance fixture serves (the
// effect and replay safety in brackets):
//
//   - echo {"text": s} (read-only, safe): a result whose content is s.
//   - progress {"count": n} (read-only, safe): n progress messages, then a
//     result.
//   - slow {"millis": n} (read-only, safe): one progress message, then
//     waits n ms; stops when the call is cancelled, and ends at the
//     request's timeout_millis with a definitive execution error.
//   - slow_inflight {"wait_millis": n} (read-only, safe): waits up to n ms
//     until no slow call runs; its content is how many still run.
//   - problem {} (read-only, safe): a result with a model-visible problem.
//   - fail_definitive {} (read-only, safe): a definitive execution error.
//   - fail_uncertain {} (mutating, unsafe): an uncertain execution error.
//   - write_file {"path": p, "content": s} (mutating, fs.write): writes s
//     to p inside the plugin's own directory; a path leading out of it is
//     a model-visible problem.
//
// The package must not know any plugin implementation: it never imports
// the plugin host or an SDK, so a bug shared by the host and a plugin
// cannot hide here.
package conformance
