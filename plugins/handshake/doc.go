// Package handshake owns the bytes of plugin/v1 around the gRPC service
// (plugins/PROTOCOL.md): the per-launch secret, the handshake line a plugin
// prints on stdout, the plugin's proof that it knows the secret and the
// host's per-call authentication value. Host and plugin SDK both use it, so
// the two sides cannot drift apart.
//
// It must not know about processes, gRPC or tools: it parses and formats
// bounded strings and computes HMACs. A Secret never appears in an error or
// in its own String form.
package handshake
