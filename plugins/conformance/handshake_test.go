package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var proofHex = strings.Repeat("ab", 32)

func TestP8_ParseHandshakeAcceptsTheProtocolsLine(t *testing.T) {
	h, err := ParseHandshake([]byte("SPICE-PLUGIN|1|unix|/tmp/d/plugin.sock|" + proofHex + "\n"))
	require.NoError(t, err)
	require.Equal(t, Handshake{Version: 1, Network: "unix", Address: "/tmp/d/plugin.sock", Proof: proofHex}, h)
	h, err = ParseHandshake([]byte("SPICE-PLUGIN|1|tcp|127.0.0.1:4242|" + proofHex))
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:4242", h.Address)
}

func TestP8_ParseHandshakeRefusesMalformedLines(t *testing.T) {
	for _, line := range []string{
		"",
		"hello\n",
		"SPICE-PLUGIN|1|unix|/tmp/s|" + proofHex + "|extra\n",
		"spice-plugin|1|unix|/tmp/s|" + proofHex,
		"SPICE-PLUGIN||unix|/tmp/s|" + proofHex,
		"SPICE-PLUGIN|01|unix|/tmp/s|" + proofHex,
		"SPICE-PLUGIN|-1|unix|/tmp/s|" + proofHex,
		"SPICE-PLUGIN|4294967296|unix|/tmp/s|" + proofHex,
		"SPICE-PLUGIN|1|udp|/tmp/s|" + proofHex,
		"SPICE-PLUGIN|1|unix|relative.sock|" + proofHex,
		"SPICE-PLUGIN|1|unix|/tmp/../etc/s|" + proofHex,
		"SPICE-PLUGIN|1|tcp|0.0.0.0:4242|" + proofHex,
		"SPICE-PLUGIN|1|tcp|10.0.0.1:4242|" + proofHex,
		"SPICE-PLUGIN|1|tcp|127.0.0.1:0|" + proofHex,
		"SPICE-PLUGIN|1|tcp|localhost:4242|" + proofHex,
		"SPICE-PLUGIN|1|unix|/tmp/s|" + strings.ToUpper(proofHex),
		"SPICE-PLUGIN|1|unix|/tmp/s|" + proofHex[:62],
		"SPICE-PLUGIN|1|unix|/tmp/s|" + proofHex[:62] + "zz",
		"SPICE-PLUGIN|1|unix|/" + strings.Repeat("a", MaxHandshakeLine) + "|" + proofHex,
	} {
		_, err := ParseHandshake([]byte(line))
		require.Truef(t, errors.Is(err, ErrHandshake), "%q: %v", line, err)
	}
}

func TestP8_ProofAndTokenAreKeyedByTheSecretBytes(t *testing.T) {
	secret := bytes.Repeat([]byte{7}, 32)
	// Independent values (HMAC-SHA256 with the 32 raw bytes as key),
	// computed once with Python's hmac module.
	require.Equal(t, "cd6f7801ddceb1ba2940d1f9f9a7bd99c513de9033a3f7476c217474c22eda37", HostToken(secret))
	h := Handshake{Network: "unix", Address: "/tmp/d/plugin.sock", Proof: ExpectedProof(secret, "unix", "/tmp/d/plugin.sock")}
	require.True(t, h.VerifyProof(secret))
	require.False(t, h.VerifyProof(bytes.Repeat([]byte{8}, 32)))
	h.Address = "/tmp/e/plugin.sock"
	require.False(t, h.VerifyProof(secret), "the proof binds the endpoint")
}

func FuzzParseHandshake(f *testing.F) {
	f.Add([]byte("SPICE-PLUGIN|1|unix|/tmp/d/plugin.sock|" + proofHex + "\n"))
	f.Add([]byte("SPICE-PLUGIN|1|tcp|127.0.0.1:1|" + proofHex))
	f.Add([]byte("SPICE-PLUGIN|1|unix||"))
	f.Fuzz(func(t *testing.T, line []byte) {
		h, err := ParseHandshake(line)
		if err != nil {
			require.ErrorIs(t, err, ErrHandshake)
			return
		}
		// What parses prints back to the same line.
		again := fmt.Sprintf("SPICE-PLUGIN|%d|%s|%s|%s", h.Version, h.Network, h.Address, h.Proof)
		require.Equal(t, string(bytes.TrimSuffix(line, []byte("\n"))), again)
	})
}
