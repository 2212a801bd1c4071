package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// logType says what a log records, decided by the first event the store
// sees of it: a pair timeline starts with a pair kind (one beginning with
// orchestrator's KindPrefix, spelled here as pairPrefix), a run log with a
// run kind. A pair timeline also holds run kinds, relayed from its runs in
// the envelope orchestrator's schema names (FieldWorker, FieldRunID,
// FieldRunSeq, FieldPayload), read by pairFields.relayOf.
type logType string

const (
	logRun   logType = "run"
	logPair  logType = "pair"
	logOther logType = "other"
)

func firstType(kind string) logType {
	switch {
	case isPairKind(kind):
		return logPair
	case isRunKind(kind):
		return logRun
	}
	return logOther
}

func isRunKind(kind string) bool {
	for k := range event.Kinds() {
		if k == kind {
			return true
		}
	}
	return false
}

// maxCachedLogs bounds the writer's log-type cache; a log leaves it at its
// terminal, and the cache starts over when it is full of logs that never
// ended.
const maxCachedLogs = 4096

type logCache map[string]logType

func (c logCache) reset() { clear(c) }

// classify returns the type of e's log, recording it at its first event.
func (w *writer) classify(ctx context.Context, e eventlog.Event) (logType, error) {
	if t, ok := w.logs[e.Log()]; ok {
		return t, nil
	}
	var s string
	err := w.st.selectLog.QueryRowContext(ctx, e.Log()).Scan(&s)
	switch {
	case err == nil:
	case errors.Is(err, sql.ErrNoRows):
		s = string(firstType(e.Kind()))
		if _, err := w.st.insertLog.ExecContext(ctx, e.Log(), s); err != nil {
			return "", err
		}
	default:
		return "", err
	}
	if len(w.logs) >= maxCachedLogs {
		w.logs.reset()
	}
	w.logs[e.Log()] = logType(s)
	return logType(s), nil
}

// derive updates the runs, pairs, pair_runs and calls tables from a newly
// recorded event. Those tables are an index over the events: a payload
// that cannot be read leaves them as they are, and the event is recorded
// all the same.
func (w *writer) derive(ctx context.Context, e eventlog.Event, body []byte) error {
	t, err := w.classify(ctx, e)
	if err != nil {
		return err
	}
	switch t {
	case logRun:
		if !indexed(e.Kind()) {
			return nil
		}
		p := typedPayload(e, body)
		if p == nil {
			return nil
		}
		if isRunTerminal(e.Kind()) {
			delete(w.logs, e.Log())
		}
		return w.deriveRun(ctx, e.Log(), e.Seq(), e.Time(), p)
	case logPair:
		if !isPairKind(e.Kind()) && !indexed(e.Kind()) {
			// A relayed run event that changes no derived table, as most
			// of a streaming pair's events are: its run's pair_runs row
			// came with the run's first event, run.started, which is
			// indexed. Reading its payload would cost the writer more
			// than the row itself.
			return nil
		}
		return w.derivePair(ctx, e, payloadOf(body))
	}
	return nil
}

func (w *writer) derivePair(ctx context.Context, e eventlog.Event, payload []byte) error {
	f, ok := readPairFields(payload)
	if !ok {
		return nil
	}
	pair, ts := e.Log(), timeText(e.Time())
	if e.Kind() == kindPairStarted {
		workers, err := json.Marshal(nonNil(workerNames(f.Workers)))
		if err != nil {
			return err
		}
		_, err = w.st.pairStarted.ExecContext(ctx, pair, jsonString(f.PlanID), string(workers), ts)
		return err
	}
	if status, ok := pairStatus(e.Kind()); ok {
		delete(w.logs, pair)
		_, err := w.st.pairEnded.ExecContext(ctx, pair, ts, string(status), f.reasonText())
		return err
	}
	if isPairKind(e.Kind()) {
		return nil
	}
	r, ok := f.relayOf()
	if !ok {
		return nil
	}
	if _, err := w.st.pairRun.ExecContext(ctx, pair, r.RunID, r.Worker, int64(e.Seq())); err != nil {
		return err
	}
	if r.Payload == nil {
		return nil
	}
	p, err := event.DecodePayload(e.Kind(), r.Payload)
	if err != nil {
		return nil
	}
	return w.deriveRun(ctx, r.RunID, r.RunSeq, e.Time(), p)
}

// deriveRun applies one run event to the runs and calls tables. The same
// event may arrive twice, from the run's own log and relayed through a
// pair timeline; every statement gives the same result either way.
func (w *writer) deriveRun(ctx context.Context, run string, seq uint64, t time.Time, p event.Payload) error {
	ts := timeText(t)
	var err error
	switch p := p.(type) {
	case event.RunStarted:
		_, err = w.st.runStarted.ExecContext(ctx, run, p.PlanID, p.Definition, p.Model, ts)
	case event.RunCompleted:
		_, err = w.st.runEnded.ExecContext(ctx, run, ts, string(StatusCompleted), "", "", p.Turns, p.InputTokens, p.OutputTokens)
	case event.RunFailed:
		_, err = w.st.runEnded.ExecContext(ctx, run, ts, string(StatusFailed), p.Problem.Code(), p.Problem.Message(), p.Turns, p.InputTokens, p.OutputTokens)
	case event.RunCancelled:
		_, err = w.st.runEnded.ExecContext(ctx, run, ts, string(StatusCancelled), "", "", p.Turns, p.InputTokens, p.OutputTokens)
	case event.ToolStarted:
		_, err = w.st.callStarted.ExecContext(ctx, run, string(p.OperationID), string(p.CallID), p.Name, p.Effect, p.Replay, int64(seq))
	case event.ToolCompleted:
		_, err = w.st.callEnded.ExecContext(ctx, string(CallCompleted), "", int64(seq), run, string(p.OperationID))
	case event.ToolFailed:
		_, err = w.st.callEnded.ExecContext(ctx, string(CallFailed), p.Outcome, int64(seq), run, string(p.OperationID))
	case event.ToolCancelled:
		_, err = w.st.callEnded.ExecContext(ctx, string(CallCancelled), p.Outcome, int64(seq), run, string(p.OperationID))
	}
	return err
}

// indexed reports whether a run kind changes the derived tables.
func indexed(kind string) bool {
	switch kind {
	case event.KindRunStarted, event.KindToolStarted,
		event.KindToolCompleted, event.KindToolFailed, event.KindToolCancelled:
		return true
	}
	return isRunTerminal(kind)
}

func isRunTerminal(kind string) bool {
	switch kind {
	case event.KindRunCompleted, event.KindRunFailed, event.KindRunCancelled:
		return true
	}
	return false
}

// typedPayload returns e's kernel payload: the typed value the engine
// appended, or else the payload decoded strictly from the recorded bytes.
// Only kernel/event's own types are taken as they are: a payload of any
// other type is foreign code, which the writer's goroutine never calls.
func typedPayload(e eventlog.Event, body []byte) event.Payload {
	switch p := e.Payload().(type) {
	case event.RunStarted, event.RunCompleted, event.RunFailed, event.RunCancelled,
		event.ToolStarted, event.ToolCompleted, event.ToolFailed, event.ToolCancelled:
		if tp := p.(event.Payload); tp.Kind() == e.Kind() {
			return tp
		}
	}
	p, err := event.DecodePayload(e.Kind(), payloadOf(body))
	if err != nil {
		return nil
	}
	return p
}

// payloadSep precedes the payload in every canonical envelope. Nothing
// before it can contain it: the kind is a name without quotes and the time
// has a fixed form.
var payloadSep = []byte(`","payload":`)

// payloadOf returns the payload bytes of a canonical envelope, nil if it
// has none.
func payloadOf(body []byte) []byte {
	i := bytes.Index(body, payloadSep)
	if i < 0 || len(body) < i+len(payloadSep)+1 {
		return nil
	}
	return body[i+len(payloadSep) : len(body)-1]
}

func timeText(t time.Time) string { return t.UTC().Format(eventlog.TimeLayout) }

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
