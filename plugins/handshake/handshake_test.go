package handshake

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func secret(t testing.TB) Secret {
	t.Helper()
	s, err := NewSecret(rand.Reader)
	require.NoError(t, err)
	return s
}

func TestP2_LineRoundTripAndProof(t *testing.T) {
	s := secret(t)
	l := NewLine(s, Version, NetworkUnix, "/tmp/spice-plugin-1/plugin.sock")
	got, err := Parse(l.Format())
	require.NoError(t, err)
	require.Equal(t, l, got)
	require.True(t, s.CheckProof(got))
	require.True(t, got.InDir("/tmp/spice-plugin-1"))
	require.False(t, got.InDir("/tmp"))
	require.False(t, secret(t).CheckProof(got), "another secret's proof fails")
	got.Address = "/tmp/spice-plugin-1/other.sock"
	require.False(t, s.CheckProof(got), "the proof binds the address")

	tcp := NewLine(s, Version, NetworkTCP, "127.0.0.1:4242")
	got, err = Parse(tcp.Format())
	require.NoError(t, err)
	require.True(t, s.CheckProof(got))
}

func TestP2_MalformedLinesRefused(t *testing.T) {
	proof := strings.Repeat("a", 64)
	for _, line := range []string{
		"",
		"hello",
		"SPICE-PLUGIN|1|unix|/tmp/x.sock",
		"SPICE-PLUGIN|1|unix|/tmp/x.sock|" + proof + "|extra",
		"OTHER|1|unix|/tmp/x.sock|" + proof,
		"SPICE-PLUGIN|01|unix|/tmp/x.sock|" + proof,
		"SPICE-PLUGIN|x|unix|/tmp/x.sock|" + proof,
		"SPICE-PLUGIN|1|udp|/tmp/x.sock|" + proof,
		"SPICE-PLUGIN|1|unix|relative.sock|" + proof,
		"SPICE-PLUGIN|1|unix|/tmp/../x.sock|" + proof,
		"SPICE-PLUGIN|1|tcp|0.0.0.0:80|" + proof,
		"SPICE-PLUGIN|1|tcp|127.0.0.1:0|" + proof,
		"SPICE-PLUGIN|1|tcp|127.0.0.1:99999|" + proof,
		"SPICE-PLUGIN|1|tcp|10.0.0.1:80|" + proof,
		"SPICE-PLUGIN|1|unix|/tmp/x.sock|" + strings.ToUpper(proof),
		"SPICE-PLUGIN|1|unix|/tmp/x.sock|abc",
		"SPICE-PLUGIN|1|unix|/tmp/x\t.sock|" + proof,
		"SPICE-PLUGIN|1|unix|/" + strings.Repeat("a", 1100) + "|" + proof,
	} {
		_, err := Parse(line)
		require.ErrorIs(t, err, ErrMalformed, "%q", line)
		require.NotContains(t, err.Error(), proof, "errors never quote the line")
	}
}

func TestP2_SecretLineAndRedaction(t *testing.T) {
	s := secret(t)
	line := s.Line()
	require.Len(t, line, 65)
	require.Equal(t, byte('\n'), line[64])
	back, err := ParseSecret(string(line[:64]))
	require.NoError(t, err)
	require.Equal(t, s, back)
	require.Equal(t, s.HostAuth(), back.HostAuth())
	require.True(t, s.CheckHostAuth(s.HostAuth()))
	require.False(t, s.CheckHostAuth(secret(t).HostAuth()))
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		require.NotContains(t, fmt.Sprintf(f, s), string(line[:16]))
	}
	for _, bad := range []string{"", strings.Repeat("A", 64), strings.Repeat("a", 63), strings.Repeat("z", 64)} {
		_, err := ParseSecret(bad)
		require.ErrorIs(t, err, ErrMalformed)
	}
	_, err = NewSecret(bytes.NewReader(nil))
	require.Error(t, err)
}

func TestP3_VersionsRoundTrip(t *testing.T) {
	vs, err := ParseVersions(FormatVersions(1, 2))
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2}, vs)
	for _, bad := range []string{"", "x", "1,,2", strings.Repeat("1,", 20) + "1"} {
		_, err := ParseVersions(bad)
		require.ErrorIs(t, err, ErrMalformed)
	}
}

func FuzzHandshakeLine(f *testing.F) {
	s, _ := ParseSecret(strings.Repeat("ab", 32))
	f.Add(NewLine(s, 1, NetworkUnix, "/tmp/d/plugin.sock").Format())
	f.Add(NewLine(s, 1, NetworkTCP, "127.0.0.1:1234").Format())
	f.Add("SPICE-PLUGIN|1|unix||")
	f.Add("hello world")
	f.Fuzz(func(t *testing.T, line string) {
		l, err := Parse(line)
		if err != nil {
			if !bytes.Contains([]byte(err.Error()), []byte("handshake: ")) {
				t.Fatalf("untyped error %v", err)
			}
			return
		}
		if len(line) >= MaxLineBytes {
			t.Fatalf("accepted an oversized line")
		}
		back, err := Parse(l.Format())
		if err != nil || back != l || l.Format() != line {
			t.Fatalf("round trip: %q -> %+v", line, l)
		}
		_ = s.CheckProof(l)
	})
}

func TestP8_ProofAndTokenAreKeyedByTheSecretBytes(t *testing.T) {
	s, err := NewSecret(bytes.NewReader(bytes.Repeat([]byte{7}, 32)))
	require.NoError(t, err)
	// Independent values (HMAC-SHA256 with the 32 raw bytes as key, not
	// their hex), computed once with Python's hmac module.
	require.Equal(t, "cd6f7801ddceb1ba2940d1f9f9a7bd99c513de9033a3f7476c217474c22eda37", s.HostAuth())
	l := NewLine(s, Version, NetworkUnix, "/tmp/d/plugin.sock")
	require.True(t, s.CheckProof(l))
	other, err := NewSecret(bytes.NewReader(bytes.Repeat([]byte{8}, 32)))
	require.NoError(t, err)
	require.False(t, other.CheckProof(l))
	l.Address = "/tmp/e/plugin.sock"
	require.False(t, s.CheckProof(l), "the proof binds the endpoint")
}

func TestP8_ParseRefusesWhatTheSuiteRefuses(t *testing.T) {
	proof := strings.Repeat("ab", 32)
	for _, line := range []string{
		"SPICE-PLUGIN||unix|/tmp/s|" + proof,
		"SPICE-PLUGIN|-1|unix|/tmp/s|" + proof,
		"SPICE-PLUGIN|4294967296|unix|/tmp/s|" + proof,
		"spice-plugin|1|unix|/tmp/s|" + proof,
		"SPICE-PLUGIN|1|tcp|localhost:4242|" + proof,
		"SPICE-PLUGIN|1|unix|/tmp/s|" + proof[:62],
		"SPICE-PLUGIN|1|unix|/tmp/s|" + proof[:62] + "zz",
		"SPICE-PLUGIN|1|unix|/" + strings.Repeat("a", MaxLineBytes) + "|" + proof,
	} {
		_, err := Parse(line)
		require.ErrorIs(t, err, ErrMalformed, "%q", line)
	}
	l, err := Parse("SPICE-PLUGIN|1|tcp|127.0.0.1:4242|" + proof)
	require.NoError(t, err)
	require.Equal(t, Line{Version: 1, Network: NetworkTCP, Address: "127.0.0.1:4242", Proof: proof}, l)
}

// A line (its newline excluded) of MaxLineBytes-1 bytes is the longest
// accepted: with its newline it fills the bound exactly. One byte more is
// refused for its length.
func TestP5_ParseAtItsLimit(t *testing.T) {
	s := secret(t)
	lineOf := func(n int) string {
		base := NewLine(s, Version, NetworkUnix, "/d/").Format()
		l := NewLine(s, Version, NetworkUnix, "/d/"+strings.Repeat("s", n-len(base)))
		require.Len(t, l.Format(), n)
		return l.Format()
	}
	got, err := Parse(lineOf(MaxLineBytes - 1))
	require.NoError(t, err)
	require.True(t, s.CheckProof(got))
	_, err = Parse(lineOf(MaxLineBytes))
	require.ErrorContains(t, err, "exceeds")
}
