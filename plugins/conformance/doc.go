// Package conformance is the host-owned plugin/v1 conformance suite (P8): a
// fixed, named list of cases that every plugin/v1 implementation must
// pass, whatever its language. It drives a plugin through the public
// protocol only (plugins/PROTOCOL.md and plugin.proto): launch and
// handshake, authentication, protocol negotiation, the manifest against
// the kernel's tool contracts, the outcomes of the tool profile below,
// cancellation, the call's own deadline, unknown fields, message and
// progress bounds and shutdown, which leaves no process of the plugin's
// tree behind.
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
// The cases call the tools of the conformance tool profile, which a
// fixture serves: plugins/PROTOCOL.md lists them, with their effects and
// what each must do.
//
// The package must not know any plugin implementation: it never imports
// the plugin host or an SDK, so a bug shared by the host and a plugin
// cannot hide here. It shares two mechanisms with the host, the verified
// private copy of a pin (plugins/internal/pin) and the walk of a process
// tree (proctree), so that both launch the same bytes
// and see the same descendants.
package conformance
