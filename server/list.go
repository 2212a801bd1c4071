package server

import (
	"cmp"
	"encoding/base64"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/store"
)

// List bounds.
const (
	DefaultPageSize = 50
	MaxPageSize     = 500
)

// summaryView is one pair in GET /v1/pairs.
type summaryView struct {
	ID      string     `json:"id"`
	Name    string     `json:"name,omitempty"`
	Task    string     `json:"task,omitempty"`
	State   string     `json:"state"`
	Reason  string     `json:"reason,omitempty"`
	Workers []string   `json:"workers"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	Links   links      `json:"links"`

	at time.Time // the sort key: submission, else start
}

var states = []string{"queued", "running", "completed", "failed", "cancelled", "interrupted"}

// MaxQueryBytes bounds the search text of GET /v1/pairs?q=.
const MaxQueryBytes = 256

// listPairs serves GET /v1/pairs?state=&reason=&q=&limit=&cursor=: newest
// first. The pairs this server keeps in memory come with the ones the
// store recorded (the newest store.MaxListLimit of them); the cursor is
// opaque. q keeps the pairs whose ID, spec name or task contains it,
// case-insensitively; reason those that ended for it.
func (s *Server) listPairs(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	state := q.Get("state")
	if state != "" && !slices.Contains(states, state) {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "state",
			Message: "state: must be one of " + strings.Join(states, ", ")})
		return
	}
	reason := q.Get("reason")
	if len(reason) > MaxQueryBytes {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "reason",
			Message: "reason: at most " + strconv.Itoa(MaxQueryBytes) + " bytes"})
		return
	}
	search := q.Get("q")
	if len(search) > MaxQueryBytes {
		writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "q",
			Message: "q: at most " + strconv.Itoa(MaxQueryBytes) + " bytes"})
		return
	}
	search = strings.ToLower(search)
	limit := DefaultPageSize
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > MaxPageSize {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "limit",
				Message: "limit: must be an integer from 1 to " + strconv.Itoa(MaxPageSize)})
			return
		}
		limit = n
	}
	var after *summaryView
	if c := q.Get("cursor"); c != "" {
		cur, ok := decodeCursor(c)
		if !ok {
			writeError(w, http.StatusBadRequest, apiError{Code: codeBadRequest, Field: "cursor", Message: "cursor: not one this server gave"})
			return
		}
		after = &cur
	}

	seen := make(map[string]bool)
	var all []summaryView
	s.mu.Lock()
	mem := make([]*entry, 0, len(s.pairs))
	for _, e := range s.pairs {
		mem = append(mem, e)
	}
	s.mu.Unlock()
	for _, e := range mem {
		info, err := s.info(e)
		if err != nil {
			continue // retired by the scheduler: the store has it, if anything
		}
		v := summaryView{ID: e.id, State: info.State.String(), Workers: []string{}, Links: linksOf(e.id),
			Started: timePtr(info.Started), Ended: timePtr(info.Ended), at: e.submitted}
		if info.State.Terminal() && info.Result.Reason != 0 {
			v.Reason = info.Result.Reason.String()
		} else if info.State == scheduler.Cancelled {
			v.Reason = "cancelled"
		}
		seen[e.id] = true
		all = append(all, v)
	}
	// Without a cursor the first page needs no more of the store than a
	// page beyond what memory holds; a cursor may point anywhere.
	n := store.MaxListLimit
	if after == nil && state == "" && reason == "" && search == "" {
		n = min(n, limit+len(mem)+1)
	}
	recorded, err := s.cfg.Store.ListPairs(r.Context(), store.ListOptions{Limit: n})
	if err != nil {
		s.storeError(w, err)
		return
	}
	workers := make(map[string][]string, len(recorded))
	for _, p := range recorded {
		workers[p.ID] = append([]string{}, p.Workers...)
		if seen[p.ID] {
			continue
		}
		all = append(all, summaryView{ID: p.ID, State: string(p.Status), Reason: p.Reason, Workers: workers[p.ID],
			Started: timePtr(p.Started), Ended: timePtr(p.Ended), Links: linksOf(p.ID), at: listedAt(p)})
	}
	for i := range all {
		if ws, ok := workers[all[i].ID]; ok {
			all[i].Workers = ws
		}
	}
	slices.SortFunc(all, newestFirst)

	page := make([]summaryView, 0, limit)
	var next string
	for _, v := range all {
		if state != "" && v.State != state || reason != "" && v.Reason != reason {
			continue
		}
		if search != "" || len(page) < limit {
			m := s.readMeta(v.ID)
			v.Name, v.Task = m.Name, m.Task
		}
		if search != "" && !strings.Contains(strings.ToLower(v.ID), search) &&
			!strings.Contains(strings.ToLower(v.Name), search) && !strings.Contains(strings.ToLower(v.Task), search) {
			continue
		}
		if after != nil && newestFirst(v, *after) <= 0 {
			continue
		}
		if len(page) == limit {
			next = encodeCursor(page[len(page)-1])
			break
		}
		page = append(page, v)
	}
	writeJSON(w, http.StatusOK, struct {
		Pairs      []summaryView `json:"pairs"`
		NextCursor string        `json:"next_cursor,omitempty"`
	}{page, next})
}

// listedAt is the time a recorded pair is listed by: the history lists
// by submission where it knows it, and each page must follow its order.
func listedAt(p store.PairSummary) time.Time {
	if !p.Submitted.IsZero() {
		return p.Submitted
	}
	return p.Started
}

// newestFirst orders by time, newest first, then by ID.
func newestFirst(a, b summaryView) int {
	if c := b.at.Compare(a.at); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func encodeCursor(v summaryView) string {
	var ns int64 // 0 stands for an unknown time
	if !v.at.IsZero() {
		ns = v.at.UnixNano()
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(ns, 10) + " " + v.ID))
}

func decodeCursor(c string) (summaryView, bool) {
	if len(c) > 512 {
		return summaryView{}, false
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil {
		return summaryView{}, false
	}
	ns, pairID, ok := strings.Cut(string(b), " ")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || pairID == "" {
		return summaryView{}, false
	}
	v := summaryView{ID: pairID}
	if n != 0 {
		v.at = time.Unix(0, n)
	}
	return v, true
}
