package conformance

import (
	"errors"

	"github.com/spice-orch/spice-orch/plugins/handshake"
)

// The handshake line's syntax, its proof and the host's token are
// plugins/handshake's, the one parser of the protocol's line. That
// package is the protocol's wire format, not a plugin implementation: the
// Python fixture, which shares no code with it, checks it from the other
// side, and its test vectors were computed independently.

// MaxHandshakeLine bounds the handshake line, its newline included
// (PROTOCOL.md).
const MaxHandshakeLine = handshake.MaxLineBytes

// AuthMetadata is the gRPC metadata key that carries the host's token.
const AuthMetadata = handshake.AuthMetadata

// Handshake is a parsed handshake line:
// SPICE-PLUGIN|<version>|<network>|<address>|<proof>.
type Handshake = handshake.Line

// Errors of a launch; a launch error matches one of them (errors.Is).
var (
	ErrDigest       = errors.New("conformance: the executable does not match its pinned SHA-256")
	ErrPath         = errors.New("conformance: the executable path is not absolute")
	ErrExited       = errors.New("conformance: the plugin exited before its handshake line")
	ErrStartTimeout = errors.New("conformance: no handshake line within the start bound")
	ErrHandshake    = errors.New("conformance: malformed handshake line")
	ErrProof        = errors.New("conformance: the handshake proof does not verify")
	ErrProtocol     = errors.New("conformance: the plugin chose a protocol version the host did not offer")
)
