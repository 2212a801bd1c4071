package handshake

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"path/filepath"
	"strconv"
	"strings"
)

// Protocol constants of plugin/v1 (PROTOCOL.md).
const (
	// Prefix starts every handshake line.
	Prefix = "SPICE-PLUGIN"
	// Version is the protocol version of plugin/v1.
	Version = 1
	// MaxLineBytes bounds a handshake line, its newline included.
	MaxLineBytes = 1024
	// EnvDir names the environment variable with the launch's private
	// directory, in which the plugin creates its Unix socket.
	EnvDir = "SPICE_PLUGIN_DIR"
	// EnvProtocols names the environment variable with the protocol
	// versions the host speaks, comma-separated.
	EnvProtocols = "SPICE_PLUGIN_PROTOCOLS"
	// EnvRoot names the environment variable with the directory holding
	// the launch's verified copies of the files a pin covers beside the
	// executable (an interpreted plugin's sources); unset without files.
	EnvRoot = "SPICE_PLUGIN_ROOT"
	// AuthMetadata is the gRPC metadata key of the host's authentication.
	AuthMetadata = "x-spice-plugin-auth"
	// IdempotencyMetadata is the gRPC metadata key of a call's idempotency
	// key on Execute: 64 lower-case hex characters, derived from the pair,
	// run and call IDs, the same each time the call is delivered.
	IdempotencyMetadata = "x-spice-idempotency-key"
	// NetworkUnix and NetworkTCP are the networks a plugin may listen on.
	NetworkUnix = "unix"
	NetworkTCP  = "tcp"

	pluginDomain = "spice-plugin/v1 plugin|"
	hostDomain   = "spice-plugin/v1 host"
	secretBytes  = 32
)

// ErrMalformed is matched by every parse error of this package.
var ErrMalformed = errors.New("handshake: malformed")

// Error says what is wrong with a handshake line or secret. It never
// quotes the input.
type Error struct{ Reason string }

func (e *Error) Error() string { return "handshake: " + e.Reason }

// Is makes every *Error match ErrMalformed.
func (e *Error) Is(target error) bool { return target == ErrMalformed }

func malformed(reason string) error { return &Error{Reason: reason} }

// Secret is the 32-byte secret of one launch. Its String form hides it.
type Secret struct{ b [secretBytes]byte }

// NewSecret reads a fresh secret from random (crypto/rand.Reader).
func NewSecret(random io.Reader) (Secret, error) {
	var s Secret
	if _, err := io.ReadFull(random, s.b[:]); err != nil {
		return Secret{}, errors.New("handshake: no randomness for the secret")
	}
	return s, nil
}

// ParseSecret decodes the secret line a plugin reads from stdin: 64
// lower-case hex characters, without the newline.
func ParseSecret(line string) (Secret, error) {
	if len(line) != 2*secretBytes {
		return Secret{}, malformed("the secret is not 64 hex characters")
	}
	var s Secret
	for i := 0; i < len(line); i++ {
		c := line[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return Secret{}, malformed("the secret is not lower-case hex")
		}
	}
	if _, err := hex.Decode(s.b[:], []byte(line)); err != nil {
		return Secret{}, malformed("the secret is not lower-case hex")
	}
	return s, nil
}

// Line returns the secret's stdin line, newline included. Only the host's
// launcher writes it, to the plugin's stdin.
func (s Secret) Line() []byte {
	out := make([]byte, 2*secretBytes+1)
	hex.Encode(out, s.b[:])
	out[len(out)-1] = '\n'
	return out
}

// String hides the secret, so that printing it by mistake leaks nothing.
func (s Secret) String() string { return "handshake.Secret(redacted)" }

// GoString hides the secret from %#v too.
func (s Secret) GoString() string { return s.String() }

// IsZero reports whether s is the zero Secret.
func (s Secret) IsZero() bool { return s == Secret{} }

func (s Secret) mac(parts ...string) []byte {
	m := hmac.New(sha256.New, s.b[:])
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

// PluginProof is the proof a plugin puts in its handshake line for the
// endpoint network/address.
func (s Secret) PluginProof(network, address string) string {
	return hex.EncodeToString(s.mac(pluginDomain, network, "|", address))
}

// HostAuth is the value of AuthMetadata on every call of the host.
func (s Secret) HostAuth() string { return hex.EncodeToString(s.mac(hostDomain)) }

// CheckHostAuth reports, in constant time, whether v is the host's value.
func (s Secret) CheckHostAuth(v string) bool {
	return hmac.Equal([]byte(v), []byte(s.HostAuth()))
}

// CheckProof reports, in constant time, whether l carries the proof of s.
func (s Secret) CheckProof(l Line) bool {
	return hmac.Equal([]byte(l.Proof), []byte(s.PluginProof(l.Network, l.Address)))
}

// Line is a parsed handshake line.
type Line struct {
	Version uint32
	Network string // NetworkUnix or NetworkTCP
	Address string // an absolute socket path, or 127.0.0.1:PORT
	Proof   string // 64 lower-case hex characters
}

// Format returns the line without its newline.
func (l Line) Format() string {
	return Prefix + "|" + strconv.FormatUint(uint64(l.Version), 10) + "|" + l.Network + "|" + l.Address + "|" + l.Proof
}

// NewLine returns the handshake line of a plugin listening on
// network/address, with its proof.
func NewLine(s Secret, version uint32, network, address string) Line {
	return Line{Version: version, Network: network, Address: address, Proof: s.PluginProof(network, address)}
}

// Parse decodes one handshake line (without its newline). It checks the
// syntax only: the caller checks the version, that a Unix socket lies in
// its private directory (InDir) and the proof (Secret.CheckProof).
func Parse(line string) (Line, error) {
	if len(line) >= MaxLineBytes {
		return Line{}, malformed("the line exceeds " + strconv.Itoa(MaxLineBytes-1) + " bytes")
	}
	f := strings.Split(line, "|")
	if len(f) != 5 || f[0] != Prefix {
		return Line{}, malformed("not a " + Prefix + " line of five fields")
	}
	v, err := strconv.ParseUint(f[1], 10, 32)
	if err != nil || f[1] != strconv.FormatUint(v, 10) {
		return Line{}, malformed("the version is not a decimal number")
	}
	l := Line{Version: uint32(v), Network: f[2], Address: f[3], Proof: f[4]}
	switch l.Network {
	case NetworkUnix:
		if !filepath.IsAbs(l.Address) || filepath.Clean(l.Address) != l.Address || strings.ContainsRune(l.Address, 0) {
			return Line{}, malformed("the socket path is not a clean absolute path")
		}
	case NetworkTCP:
		if !loopback(l.Address) {
			return Line{}, malformed("a tcp address must be 127.0.0.1:PORT")
		}
	default:
		return Line{}, malformed("the network is neither unix nor tcp")
	}
	if len(l.Proof) != 2*sha256.Size || strings.Trim(l.Proof, "0123456789abcdef") != "" {
		return Line{}, malformed("the proof is not 64 lower-case hex characters")
	}
	for i := 0; i < len(line); i++ {
		if c := line[i]; c < 0x20 || c == 0x7f {
			return Line{}, malformed("the line holds a control character")
		}
	}
	return l, nil
}

func loopback(addr string) bool {
	port, ok := strings.CutPrefix(addr, "127.0.0.1:")
	if !ok {
		return false
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0 && port == strconv.FormatUint(n, 10)
}

// InDir reports whether the socket path of a unix line is a direct entry
// of dir, the launch's private directory.
func (l Line) InDir(dir string) bool {
	return l.Network == NetworkUnix && filepath.Dir(l.Address) == filepath.Clean(dir)
}

// FormatVersions and ParseVersions encode EnvProtocols.
func FormatVersions(vs ...uint32) string {
	s := make([]string, len(vs))
	for i, v := range vs {
		s[i] = strconv.FormatUint(uint64(v), 10)
	}
	return strings.Join(s, ",")
}

// ParseVersions decodes EnvProtocols: at most 16 decimal versions.
func ParseVersions(s string) ([]uint32, error) {
	if s == "" || len(s) > 256 {
		return nil, malformed("no protocol versions")
	}
	f := strings.Split(s, ",")
	if len(f) > 16 {
		return nil, malformed("too many protocol versions")
	}
	out := make([]uint32, 0, len(f))
	for _, x := range f {
		v, err := strconv.ParseUint(x, 10, 32)
		if err != nil {
			return nil, malformed("a protocol version is not a decimal number")
		}
		out = append(out, uint32(v))
	}
	return out, nil
}
