package acceptance

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"
)

// rewriter is a fault on the wire: it changes the n-th request (from 1) a
// worker's provider sends before the model server sees it.
type rewriter struct {
	role  string
	at    int64
	edit  func(h http.Header, body map[string]any)
	inner http.RoundTripper
	n     atomic.Int64
}

func (w *rewriter) RoundTrip(r *http.Request) (*http.Response, error) {
	if w.n.Add(1) != w.at {
		return w.inner.RoundTrip(r)
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	var body map[string]any
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, err
	}
	r = r.Clone(r.Context())
	w.edit(r.Header, body)
	raw, err = json.Marshal(body)
	if err != nil {
		return nil, err
	}
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	r.Header.Del("Content-Length")
	return w.inner.RoundTrip(r)
}

// msgAt returns message i of a request body.
func msgAt(body map[string]any, i int) map[string]any {
	return body["messages"].([]any)[i].(map[string]any)
}

// TestBreak_ProviderSendsTheWrongRequest breaks, on the wire, each thing
// the model servers check in what the provider sends: the provider part
// fails, saying which request and what, and its ledger row says so.
func TestBreak_ProviderSendsTheWrongRequest(t *testing.T) {
	for _, c := range []struct {
		name, role string
		at         int64
		edit       func(h http.Header, body map[string]any)
		want       []string
	}{
		{"no API key", "writer", 1, func(h http.Header, _ map[string]any) { h.Del("Authorization") },
			[]string{"the writer's model server refused request 1", "Authorization"}},
		{"not streamed", "reviewer", 1, func(_ http.Header, b map[string]any) { b["stream"] = false },
			[]string{"the reviewer's model server refused request 1", "stream is not true"}},
		{"no tools", "writer", 2, func(_ http.Header, b map[string]any) { delete(b, "tools") },
			[]string{"the writer's model server, request 2", "offers 0 tools", "leased plan plan-pair-proof"}},
		{"one byte of the handoff message", "reviewer", 1, func(_ http.Header, b map[string]any) {
			m := msgAt(b, 1)
			m["content"] = m["content"].(string)[:20] + "X" + m["content"].(string)[21:]
		}, []string{"the reviewer's model server, request 1", "message 2 is not the run's input (the task or the handoff message)"}},
		{"a tool result", "writer", 2, func(_ http.Header, b map[string]any) { msgAt(b, 3)["content"] = `{"path":"poem.md","bytes":70}` },
			[]string{"the writer's model server, request 2", "message 4 is not the result of call call_Qm3vZ8pL2tX9rK4bN7cW1yHd"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := goodPlay(t, Config{Transport: func(role string, rt http.RoundTripper) http.RoundTripper {
				if role != c.role {
					return rt
				}
				return &rewriter{role: role, at: c.at, edit: c.edit, inner: rt}
			}})
			err := CheckProvider(p)
			requireBreak(t, err, PartProvider, c.want...)
			row := Row(PartProvider, "T", "evidence of a pass", err)
			require.Equal(t, ResultFail, row.Result)
			require.Contains(t, row.Evidence, c.want[0])
			require.NotContains(t, row.Evidence, "evidence of a pass")
			require.NotContains(t, err.Error(), WriterKey)
		})
	}
}
