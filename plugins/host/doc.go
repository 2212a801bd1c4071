// Package host launches one plugin/v1 process, verifies it, and offers its
// tools as ordinary kernel tool.Tool values (plugins/PROTOCOL.md).
//
// Launch refuses a relative path and a digest that does not match the
// pinned SHA-256; it executes the very file it hashed (the open file, via
// /proc/self/fd, so renaming another file over the path after the check
// runs nothing new) and hashes it again once the process runs, when the
// kernel no longer lets anybody write it (an overwrite in place between the
// check and the exec fails the launch before the plugin serves). Every
// launch gets a fresh secret on stdin; the handshake line on stdout must
// come first and prove the secret; every call proves it back. The manifest
// is checked against the kernel's tool contracts (K4, K5) and the host's
// bounds before any tool is handed out. The plugin runs in its own process
// group, and Close ends the whole group.
//
// Failures become the kernel's typed outcomes (K7): anything before the
// request left the host is Definitive; a crash, a broken connection, a
// timeout, a cancellation or a protocol violation after a mutating call was
// sent is Uncertain and never retried; read-only calls are Definitive.
//
// It must not know about plans, runs, engines or pairs: the plugin's tools
// are composed into a plan by the caller.
package host
