package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/store"
)

// pairView is the API's pair resource.
type pairView struct {
	ID        string       `json:"id"`
	Name      string       `json:"name,omitempty"`
	Task      string       `json:"task,omitempty"`
	State     string       `json:"state"`
	Reason    string       `json:"reason,omitempty"`
	Limit     string       `json:"limit,omitempty"`
	Rounds    int          `json:"rounds"`
	Runs      int          `json:"runs"`
	Usage     usageView    `json:"usage"`
	Workers   []workerView `json:"workers"`
	Plan      *planView    `json:"plan,omitempty"`
	Submitted *time.Time   `json:"submitted,omitempty"`
	Started   *time.Time   `json:"started,omitempty"`
	Ended     *time.Time   `json:"ended,omitempty"`
	LastSeq   uint64       `json:"last_seq"`
	// Cancellable: this server plays the pair, it has not ended and no
	// cancel is under way. A pair another process plays is followed from
	// the store and cannot be cancelled here.
	Cancellable bool `json:"cancellable"`

	// UnpinnedTools are the pair's tools whose code is not pinned.
	UnpinnedTools []string `json:"unpinned_tools,omitempty"`

	// Waiting counts the pair's approval questions waiting for an answer
	// (GET links.approvals lists them).
	Waiting int `json:"waiting"`
	// Resumable: the pair is interrupted and this server can continue it
	// (POST links.resume): it plays its pairs itself and holds what the
	// pair was submitted with.
	Resumable bool `json:"resumable"`
	// Spec is the spec the pair was submitted with, without its secrets.
	Spec  json.RawMessage `json:"spec,omitempty"`
	Links links           `json:"links"`
}

type usageView struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	ToolCalls    int64 `json:"tool_calls"`
}

type workerView struct {
	Role string `json:"role"`
	// System is the worker's system prompt, as its spec gave it.
	System       string `json:"system,omitempty"`
	Runs         int    `json:"runs"`
	Turns        int    `json:"turns"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	ToolCalls    int64  `json:"tool_calls"`
}

type planView struct {
	ID string `json:"id"`
}

type links struct {
	Self        string `json:"self"`
	Events      string `json:"events"`
	EventsJSONL string `json:"events_jsonl"`
	Cancel      string `json:"cancel"`
	Approvals   string `json:"approvals"`
	Resume      string `json:"resume"`
}

func linksOf(pairID string) links {
	base := "/v1/pairs/" + pairID
	return links{Self: base, Events: base + "/events", EventsJSONL: base + "/events.jsonl", Cancel: base + "/cancel", Approvals: base + "/approvals", Resume: base + "/resume"}
}

// describe builds the pair resource from what this server keeps in memory
// (the scheduler's job) and what the store recorded. A pair neither knows
// is store.ErrNotFound.
func (s *Server) describe(ctx context.Context, pairID string) (pairView, error) {
	v := pairView{ID: pairID, Workers: []workerView{}, Links: linksOf(pairID)}
	m := s.readMeta(pairID)
	v.Name, v.Task, v.UnpinnedTools, v.Spec = m.Name, m.Task, m.Unpinned, m.Spec
	var info scheduler.Info
	var inMemory bool
	e := s.lookup(pairID)
	if e != nil {
		if i, err := s.info(e); err == nil {
			info, inMemory = i, true
		}
		v.Submitted = timePtr(e.submitted)
	}
	rec, err := s.cfg.Store.Pair(ctx, pairID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		if !inMemory {
			return v, store.ErrNotFound
		}
	case err != nil:
		return v, err
	default:
		s.fromRecord(&v, rec)
		if !inMemory && s.cfg.Queue != nil {
			v.Cancellable = v.State == string(statusQueued) || v.State == string(store.StatusRunning)
		}
	}
	if inMemory {
		v.State = info.State.String()
		v.Submitted, v.Started = timePtr(info.Submitted), timePtr(info.Started)
		if !info.Ended.IsZero() {
			v.Ended = timePtr(info.Ended)
		}
		if r := info.Result; info.State.Terminal() && r.Reason != 0 {
			v.Reason, v.Rounds, v.Runs = r.Reason.String(), r.Rounds, r.Runs
			if r.Limit != 0 {
				v.Limit = r.Limit.String()
			}
			v.Usage = usageView{InputTokens: r.Usage.Input(), OutputTokens: r.Usage.Output(), ToolCalls: r.ToolCalls}
		}
		if info.State == scheduler.Cancelled && v.Reason == "" {
			v.Reason = "cancelled"
		}
		v.Cancellable = !info.State.Terminal() && !e.cancelling.Load()
		if !info.State.Terminal() {
			v.Waiting = s.waiting(pairID)
		}
	}
	if e != nil {
		v.LastSeq = max(v.LastSeq, e.feed.log.Stats().LastSeq)
	}
	for i := range v.Workers {
		v.Workers[i].System = m.Systems[v.Workers[i].Role]
	}
	v.Resumable = v.State == string(store.StatusInterrupted) && s.resumable(pairID)
	return v, nil
}

// fromRecord fills v from the store's record of the pair.
func (s *Server) fromRecord(v *pairView, rec store.PairRecord) {
	sum := rec.Summary
	v.State, v.Reason = string(sum.Status), sum.Reason
	v.Started, v.Ended = timePtr(sum.Started), timePtr(sum.Ended)
	if sum.PlanID != "" {
		v.Plan = &planView{ID: sum.PlanID}
	}
	byRole := make(map[string]*workerView, 2)
	for _, role := range sum.Workers {
		v.Workers = append(v.Workers, workerView{Role: role})
	}
	for i := range v.Workers {
		byRole[v.Workers[i].Role] = &v.Workers[i]
	}
	for _, r := range rec.Runs {
		if w := byRole[r.Worker]; w != nil {
			w.Runs++
			w.Turns += r.Turns
			w.InputTokens += r.InputTokens
			w.OutputTokens += r.OutputTokens
			v.Usage.InputTokens += r.InputTokens
			v.Usage.OutputTokens += r.OutputTokens
		}
	}
	for _, en := range rec.Events {
		v.LastSeq = en.Event.Seq()
		switch kind := en.Event.Kind(); {
		case kind == "tool.started" && en.Relayed:
			v.Usage.ToolCalls++
			if w := byRole[en.Worker]; w != nil {
				w.ToolCalls++
			}
		case orchestrator.Terminal(kind):
			p, err := orchestrator.DecodePayload(kind, en.Event.Payload().AppendJSON(nil))
			if t, ok := p.(orchestrator.Ended); err == nil && ok {
				v.Rounds, v.Runs, v.Limit = t.Rounds, t.Runs, ""
				if t.Limit != 0 {
					v.Limit = t.Limit.String()
				}
				v.Usage = usageView{InputTokens: t.InputTokens, OutputTokens: t.OutputTokens, ToolCalls: t.ToolCalls}
			}
		}
	}
	if v.Runs == 0 {
		v.Runs = len(rec.Runs)
	}
}
