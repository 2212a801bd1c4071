// Package devloop is the plugin developer loop: it watches a Go or a
// Python plugin's source folder, debounces bursts of saves, builds
// deterministically into a content-addressed folder, pins and verifies the
// build, runs the host-owned conformance suite against it and activates it
// as a new generation of a host.Source for future leases.
//
// A Python plugin's "build" copies its launcher and the files it loads
// (its packages and its hash-locked lock file) into the folder named by
// their pin, checks that every requirement of the lock carries a hash and
// compiles every source with the launcher's interpreter, writing no
// bytecode: a syntax error is a FILE:LINE diagnostic like a compiler's.
//
// A build runs with a fixed environment (no network, no cgo, read-only
// module graph) and flags that leave no varying path or build ID in the
// binary, so one source gives one digest from any folder. It is made in a
// temporary folder beside the builds and renamed into Out/<sha256> only
// once complete, so no partially built tree is ever at a path the loop
// activates. A build whose source changed while it ran is discarded; the
// change it missed starts the next one, so a burst of saves converges on
// the last source.
//
// A candidate that fails to build, verify or pass conformance leaves the
// active generation serving: the report names the active generation, the
// failed candidate and diagnostics as FILE:LINE: message. Activation is
// host.Source's (P6): leased runs keep their generation, and superseded
// generations drain.
//
// It must not know about pairs, specs or the command line: playing a spec
// after an activation is its caller's work.
package devloop
