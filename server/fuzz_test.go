package server

import (
	"net/http"
	"testing"
)

// FuzzCursor: the list cursor and the stream cursor are outside bytes;
// neither panics, and a cursor this server made reads back the same.
func FuzzCursor(f *testing.F) {
	f.Add("MTIzIHBhaXItMQ", "12")
	f.Add("", "")
	f.Add("!!", "18446744073709551616")
	f.Fuzz(func(t *testing.T, list, after string) {
		if v, ok := decodeCursor(list); ok {
			again, ok := decodeCursor(encodeCursor(v))
			if !ok || again.ID != v.ID || !again.at.Equal(v.at) {
				t.Fatalf("cursor %q does not round-trip", list)
			}
		}
		r, err := http.NewRequest("GET", "/", nil)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Last-Event-ID", after)
		_, _ = cursor(r)
	})
}
