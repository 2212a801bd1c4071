package conformance

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxHandshakeLine bounds the handshake line, its newline included
// (PROTOCOL.md).
const MaxHandshakeLine = 1024

// AuthMetadata is the gRPC metadata key that carries the host's token.
const AuthMetadata = "x-spice-plugin-auth"

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

// Handshake is a parsed handshake line:
// SPICE-PLUGIN|<version>|<network>|<address>|<proof>.
type Handshake struct {
	Version uint32
	Network string // "unix" or "tcp"
	Address string // an absolute socket path, or 127.0.0.1:PORT
	Proof   string // lower-case hex of the HMAC
}

// ParseHandshake parses one handshake line (with or without its newline).
// It checks the syntax only; VerifyProof checks the proof and the
// launcher checks the version and the socket's directory.
func ParseHandshake(line []byte) (Handshake, error) {
	if len(line) > MaxHandshakeLine {
		return Handshake{}, fmt.Errorf("%w: longer than %d bytes", ErrHandshake, MaxHandshakeLine)
	}
	line = bytes.TrimSuffix(line, []byte("\n"))
	f := strings.Split(string(line), "|")
	if len(f) != 5 || f[0] != "SPICE-PLUGIN" {
		return Handshake{}, fmt.Errorf("%w: want 5 fields starting SPICE-PLUGIN", ErrHandshake)
	}
	v, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil || f[1] != strconv.FormatUint(v, 10) {
		return Handshake{}, fmt.Errorf("%w: version is not a decimal number", ErrHandshake)
	}
	h := Handshake{Version: uint32(v), Network: f[2], Address: f[3], Proof: f[4]}
	switch h.Network {
	case "unix":
		if !filepath.IsAbs(h.Address) || filepath.Clean(h.Address) != h.Address {
			return Handshake{}, fmt.Errorf("%w: the socket path is not a clean absolute path", ErrHandshake)
		}
	case "tcp":
		ap, err := netip.ParseAddrPort(h.Address)
		if err != nil || ap.Addr() != netip.AddrFrom4([4]byte{127, 0, 0, 1}) || ap.Port() == 0 {
			return Handshake{}, fmt.Errorf("%w: a tcp address must be 127.0.0.1:PORT", ErrHandshake)
		}
	default:
		return Handshake{}, fmt.Errorf("%w: network must be unix or tcp", ErrHandshake)
	}
	if len(h.Proof) != 2*sha256.Size || strings.ToLower(h.Proof) != h.Proof {
		return Handshake{}, fmt.Errorf("%w: the proof is not 64 lower-case hex characters", ErrHandshake)
	}
	if _, err := hex.DecodeString(h.Proof); err != nil {
		return Handshake{}, fmt.Errorf("%w: the proof is not hex", ErrHandshake)
	}
	return h, nil
}

// mac is lower-case hex of HMAC-SHA256(secret, text). The key is the 32
// secret bytes, not their hex spelling on stdin.
func mac(secret []byte, text string) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(text))
	return hex.EncodeToString(m.Sum(nil))
}

// ExpectedProof is the proof a plugin that knows secret prints for its
// endpoint.
func ExpectedProof(secret []byte, network, address string) string {
	return mac(secret, "spice-plugin/v1 plugin|"+network+"|"+address)
}

// HostToken is the value of x-spice-plugin-auth for secret.
func HostToken(secret []byte) string { return mac(secret, "spice-plugin/v1 host") }

// VerifyProof reports, in constant time, whether h proves secret.
func (h Handshake) VerifyProof(secret []byte) bool {
	return hmac.Equal([]byte(h.Proof), []byte(ExpectedProof(secret, h.Network, h.Address)))
}
