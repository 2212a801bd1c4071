package acceptance

import (
	"testing"
)

// The proof decodes bytes it did not make: recorded transcripts and the
// timelines clients receive. Neither decoder may panic, and a timeline
// that passes CheckTimeline has one terminal, last.

func FuzzParseTranscript(f *testing.F) {
	for _, n := range append(WriterTranscripts, ReviewerTranscripts...) {
		b, err := transcripts.ReadFile("testdata/" + n)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("HTTP/1.1 200 OK\n\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		tr, err := ParseTranscript("fuzz", b)
		if err == nil && len(tr.Events) == 0 {
			t.Fatal("a transcript without events was accepted")
		}
	})
}

func FuzzCheckTimeline(f *testing.F) {
	f.Add([]byte(`{"seq":1,"kind":"pair.started","payload":{}}` + "\n" + `{"seq":2,"kind":"pair.completed","payload":{"reason":"approved"}}` + "\n"))
	f.Add([]byte(`{"seq":1,"kind":"run.started","payload":{"worker":"w","run_id":"r","run_seq":1,"payload":{}}}` + "\n"))
	f.Add([]byte("not json\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := CheckTimeline(b)
		if err == nil && s.Terminal == "" {
			t.Fatal("a timeline without a terminal passed")
		}
	})
}
