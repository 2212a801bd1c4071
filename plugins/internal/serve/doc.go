// Package serve is the plugin side of plugin/v1: it reads the secret,
// listens on a Unix socket in the launch's private directory, prints the
// handshake line, authenticates every call and runs tools behind the
// kernel's canonical dispatcher. plugins/sdk is its public face; Faults lets
// the test fixture break the protocol on purpose.
//
// It must not know about the host's processes or plans.
package serve
