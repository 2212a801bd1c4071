package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
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

// FuzzJournal: a journal file is read back at start, whatever a crash or
// a disk left in it: it never panics, what it accepts is within the
// bounds of a submission and encodes back to an entry it accepts again,
// and every entry accept writes reads back.
func FuzzJournal(f *testing.F) {
	f.Add([]byte(`{"content_type":"application/yaml","task":"t","body":"dmVyc2lvbjogMQo="}`))
	f.Add([]byte(`{"content_type":"text/html","body":""}`))
	f.Add([]byte(`{"content_type":"application/json","body":"e30="}`))
	f.Add([]byte(`{"content_type":"application/json","body":"!!"}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		// What accept writes for a body reads back, with or without a task.
		for _, task := range []string{"", "a task"} {
			w, err := json.Marshal(journalEntry{ContentType: "application/yaml", Task: task, Body: b})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeJournal(w); err != nil {
				t.Fatalf("an entry accept wrote does not read back: %v", err)
			}
		}
		je, err := decodeJournal(b)
		if err != nil {
			return
		}
		if len(je.Body) > MaxBodyBytes {
			t.Fatal("a body over the bound")
		}
		again, err := json.Marshal(je)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeJournal(again); err != nil {
			t.Fatalf("an accepted entry does not read back: %v", err)
		}
	})
}

// FuzzDecodeAnswer: an answer body decodes to approve or deny with a
// bounded digest, or fails; it never panics.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"answer":"approve","digest":"ab"}`))
	f.Add([]byte(`{"answer":"deny","digest":"ab"} {}`))
	f.Add([]byte(`{"answer":"maybe"}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := decodeAnswer(raw)
		if err != nil {
			return
		}
		if (b.Answer != "approve" && b.Answer != "deny") || b.Digest == "" || len(b.Digest) > 128 {
			t.Fatalf("accepted %q as %+v", raw, b)
		}
	})
}

// FuzzDecodeResume: a resume body decodes to at most MaxAccepted valid
// call IDs, or fails; it never panics.
func FuzzDecodeResume(f *testing.F) {
	f.Add([]byte(`{"accept_uncertain":["c-1"]}`))
	f.Add([]byte(`{"accept_uncertain":[]} {}`))
	f.Add([]byte(`{"accept_uncertain":[""]}`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		calls, err := decodeResume(raw)
		if err != nil {
			return
		}
		if len(calls) > orchestrator.MaxAccepted {
			t.Fatalf("accepted %d calls", len(calls))
		}
		for _, c := range calls {
			if id.Check("call", string(c)) != nil {
				t.Fatalf("accepted call %q", c)
			}
		}
	})
}
