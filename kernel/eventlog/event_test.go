package eventlog_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

const golden = `{"seq":1,"kind":"test.note","time":"2026-03-04T05:06:07.000000890Z","payload":{"n":7,"text":"hi \"x\"","flag":true}}`

func TestEventEncodingIsCanonical(t *testing.T) {
	l := newLog(t, eventlog.Config{})
	local := time.FixedZone("x", 3600)
	e, err := l.Append(context.Background(), eventlog.Record{
		Kind: "test.note", Time: t0.In(local), Payload: note{N: 7, Text: `hi "x"`, Flag: true},
	})
	require.NoError(t, err)
	require.Equal(t, golden, string(e.AppendJSON(nil)))
	require.Equal(t, len(golden), e.EncodedLen())
	m, err := json.Marshal(e)
	require.NoError(t, err)
	require.Equal(t, golden, string(m))
	require.Equal(t, time.UTC, e.Time().Location())
}

func TestEncodedLenExactAcrossSequences(t *testing.T) {
	l := newLog(t, eventlog.Config{MaxEvents: 4})
	for i := range 1200 { // sequence digits grow from 1 to 4
		e, err := l.Append(context.Background(), eventlog.Record{
			Kind: "test.note", Time: t0.Add(time.Duration(i) * time.Hour * 1000), Payload: note{N: int64(i) * -977, Text: strings.Repeat("\x01é", i%5)},
		})
		require.NoError(t, err)
		require.Equal(t, len(e.AppendJSON(nil)), e.EncodedLen())
	}
}

func TestDecodeRoundTrip(t *testing.T) {
	e, err := eventlog.Decode([]byte(golden))
	require.NoError(t, err)
	require.Equal(t, uint64(1), e.Seq())
	require.Equal(t, "test.note", e.Kind())
	require.True(t, t0.Equal(e.Time()))
	require.Equal(t, `{"n":7,"text":"hi \"x\"","flag":true}`, string(e.Payload().AppendJSON(nil)))
	require.Equal(t, golden, string(e.AppendJSON(nil)))
	require.Equal(t, len(golden), e.EncodedLen())

	// The decoded payload does not alias the input.
	in := []byte(golden)
	e, err = eventlog.Decode(in)
	require.NoError(t, err)
	copy(in, strings.Repeat("x", len(in)))
	require.Equal(t, golden, string(e.AppendJSON(nil)))
}

func TestDecodeIsStrict(t *testing.T) {
	p := `"payload":{"n":1,"flag":true}}`
	for name, in := range map[string]string{
		"space":           `{"seq": 1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"seq zero":        `{"seq":0,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"seq leading 0":   `{"seq":01,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"seq overflow":    `{"seq":18446744073709551616,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"seq string":      `{"seq":"1","kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"unknown field":   `{"seq":1,"x":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"kind upper":      `{"seq":1,"kind":"A.b","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"kind escaped":    `{"seq":1,"kind":"a\u002eb","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"kind empty":      `{"seq":1,"kind":"","time":"2026-03-04T05:06:07.000000890Z",` + p,
		"time offset":     `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.00000089+01:00",` + p,
		"time short frac": `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.00000089Z0",` + p,
		"time bad month":  `{"seq":1,"kind":"a.b","time":"2026-13-04T05:06:07.000000890Z",` + p,
		"time zero":       `{"seq":1,"kind":"a.b","time":"0001-01-01T00:00:00.000000000Z",` + p,
		"payload array":   `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z","payload":[1]}`,
		"payload bad":     `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z","payload":{"n":}}`,
		"payload space":   `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z","payload": {"n":1}}`,
		"trailing bytes":  `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z",` + p + ` `,
		"two payloads":    `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z","payload":{},"payload":{}}`,
		"extra after":     `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z","payload":{},"x":1}`,
		"empty":           ``,
		"too large":       `{"seq":1,"kind":"a.b","time":"2026-03-04T05:06:07.000000890Z","payload":{"t":"` + strings.Repeat("a", eventlog.MaxEventBytes) + `"}}`,
	} {
		_, err := eventlog.Decode([]byte(in))
		require.ErrorIs(t, err, bound.ErrInvalid, name)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(golden))
	f.Add([]byte(`{"seq":18446744073709551615,"kind":"z","time":"9999-12-31T23:59:59.999999999Z","payload":{}}`))
	f.Add([]byte(`{"seq":2,"kind":"a.b","time":"0000-01-01T00:00:00.000000000Z","payload":{"a":["\u0000",{"b":null}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) > 1<<16 {
			return
		}
		e, err := eventlog.Decode(b)
		if err != nil {
			require.ErrorIs(t, err, bound.ErrInvalid)
			return
		}
		out := e.AppendJSON(nil)
		require.Equal(t, b, out, "decode→encode must give the same bytes")
		require.Equal(t, len(out), e.EncodedLen())
		again, err := eventlog.Decode(out)
		require.NoError(t, err)
		require.Equal(t, e.Seq(), again.Seq())
		require.Equal(t, e.Kind(), again.Kind())
		require.True(t, e.Time().Equal(again.Time()))
		require.True(t, json.Valid(out))
	})
}

func TestRawValidates(t *testing.T) {
	for _, bad := range []string{"", "1", "[]", " {}", "{} ", `{"a":1`, "{}{}"} {
		_, err := eventlog.NewRaw([]byte(bad))
		require.ErrorIs(t, err, bound.ErrInvalid, bad)
	}
	in := []byte(`{"a":1}`)
	r, err := eventlog.NewRaw(in)
	require.NoError(t, err)
	in[1] = 'x'
	require.Equal(t, `{"a":1}`, string(r.Bytes()))
	require.Equal(t, "{}", string(eventlog.Raw{}.AppendJSON(nil)))
	require.Equal(t, 2, eventlog.Raw{}.EncodedLen())
}
