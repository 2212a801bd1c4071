package server_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

type listed struct {
	Pairs []struct {
		ID, State, Reason, Task string
	} `json:"pairs"`
	NextCursor string `json:"next_cursor"`
}

func (h *harness) list(t *testing.T, query string) listed {
	t.Helper()
	r := h.do("GET", "/v1/pairs?"+query, "", "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var v listed
	require.NoError(t, json.Unmarshal(r.body, &v))
	return v
}

// pageIDs follows next_cursor from the first page, limit pairs a page,
// and returns the IDs in the order the pages gave them.
func (h *harness) pageIDs(t *testing.T, limit int) []string {
	t.Helper()
	var got []string
	cursor := ""
	for range 100 {
		page := h.list(t, "limit="+strconv.Itoa(limit)+"&cursor="+cursor)
		for _, p := range page.Pairs {
			got = append(got, p.ID)
		}
		if page.NextCursor == "" {
			return got
		}
		cursor = page.NextCursor
	}
	t.Fatalf("no last page after 100: %v", got)
	return nil
}

// TestS2_ListFiltersByReasonAndSearchesIDAndTask: GET /v1/pairs?q= keeps
// the pairs whose ID or task contains the text, case-insensitively, and
// ?reason= those that ended for it; the pair resource carries the task.
func TestS2_ListFiltersByReasonAndSearchesIDAndTask(t *testing.T) {
	h := newHarness(t, options{})
	plain := h.submit(testSpec{First: []string{"draft"}, Second: []string{"fine"}})
	h.waitEnded(plain)
	b, err := json.Marshal(testSpec{First: []string{"draft"}, Second: []string{"fine"}})
	require.NoError(t, err)
	r := h.do("POST", "/v1/pairs?task="+url.QueryEscape("Find The Needle"), "application/json", string(b))
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
	var created struct{ ID, Task string }
	require.NoError(t, json.Unmarshal(r.body, &created))
	require.Equal(t, "Find The Needle", created.Task)
	h.waitEnded(created.ID)

	got := h.list(t, "q=needle")
	require.Len(t, got.Pairs, 1)
	require.Equal(t, created.ID, got.Pairs[0].ID)
	require.Equal(t, "Find The Needle", got.Pairs[0].Task)
	got = h.list(t, "q="+url.QueryEscape(strings.ToUpper(plain[len(plain)-8:])))
	require.Len(t, got.Pairs, 1)
	require.Equal(t, plain, got.Pairs[0].ID)
	require.Len(t, h.list(t, "q=nothing-like-it").Pairs, 0)

	reason := h.list(t, "").Pairs[0].Reason
	require.NotEmpty(t, reason)
	require.Len(t, h.list(t, "reason="+reason).Pairs, 2)
	require.Len(t, h.list(t, "reason=max_rounds").Pairs, 0)

	resp := h.do("GET", "/v1/pairs/"+created.ID, "", "")
	require.Contains(t, string(resp.body), `"task":"Find The Needle"`)
	resp = h.do("GET", "/v1/pairs?q="+strings.Repeat("x", 257), "", "")
	require.Equal(t, http.StatusBadRequest, resp.status)
	require.Contains(t, string(resp.body), `"field":"q"`)
}
