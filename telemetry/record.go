package telemetry

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"slices"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// KindTraceRecord is the kind of the one event of a pair's trace record.
const KindTraceRecord = "trace.recorded"

// Record is what a pair's timeline does not say but its trace needs when
// it is drawn again from a store (ReplayJSON): the gen_ai.provider.name of
// each worker role, and the span the pair continued, if any. A host
// writes it beside the pair's timeline (WriteRecord) and reads it back
// (ReadRecord) before a replay: Config.Providers takes Providers, and
// Continue the Parent.
type Record struct {
	PairID    string
	Providers map[string]string // by role
	Parent    trace.SpanContext // invalid when the pair started a trace
}

// RecordLog names the log of a pair's trace record: "trace:" and the pair
// ID.
func RecordLog(pairID string) string { return "trace:" + pairID }

// ProviderNames returns the gen_ai.provider.name of each worker of cfg
// whose provider says it (a ProviderName method), by role.
func ProviderNames(cfg *orchestrator.Config) map[string]string {
	out := make(map[string]string, 2)
	for _, w := range []struct {
		role string
		p    model.Provider
	}{{cfg.First.Role, cfg.First.Engine.Provider}, {cfg.Second.Role, cfg.Second.Engine.Provider}} {
		if w.p == nil || bound.Name("role", w.role) != nil {
			continue
		}
		if name := describe(w.p).provider; name != "" {
			out[w.role] = name
		}
	}
	return out
}

// WriteRecord writes r as one terminal event of its own log
// (RecordLog(r.PairID)) to o, normally a store, stamped at.
func WriteRecord(ctx context.Context, o eventlog.Observer, r Record, at time.Time) error {
	if err := id.Check("record.pair_id", r.PairID); err != nil {
		return err
	}
	for role, name := range r.Providers {
		if err := errors.Join(bound.Name("record.providers[]", role), bound.Name("record.providers["+role+"]", name)); err != nil {
			return err
		}
	}
	log, err := eventlog.New(eventlog.Config{MaxEvents: 1, MaxBytes: eventlog.MaxEventBytes, Name: RecordLog(r.PairID),
		Required: []eventlog.Observer{o}})
	if err != nil {
		return err
	}
	_, err = log.Append(ctx, eventlog.Record{Kind: KindTraceRecord, Time: at, Terminal: true, Payload: recordPayload(r)})
	return errors.Join(err, log.Close(ctx))
}

type recordPayload Record

func (p recordPayload) fields(o *eventlog.Object) {
	o.String("pair_id", p.PairID)
	o.Begin("providers")
	for _, role := range slices.Sorted(maps.Keys(p.Providers)) {
		o.String(role, p.Providers[role])
	}
	o.End()
	if p.Parent.IsValid() {
		o.Begin("parent")
		o.String("trace_id", p.Parent.TraceID().String())
		o.String("span_id", p.Parent.SpanID().String())
		o.Bool("sampled", p.Parent.IsSampled())
		o.End()
	}
}

func (p recordPayload) AppendJSON(dst []byte) []byte {
	o := eventlog.AppendObject(dst)
	p.fields(&o)
	return o.End()
}

func (p recordPayload) EncodedLen() int {
	o := eventlog.MeasureObject()
	p.fields(&o)
	return o.Len()
}

// ReadRecord reads a trace record as a store replays its log (JSON lines,
// store.Store.ReplayJSON). A record that cannot be read is an error
// matching ErrMalformed; it never quotes the input.
func ReadRecord(r io.Reader) (Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), eventlog.MaxEventBytes+1)
	if !sc.Scan() {
		if err := sc.Err(); err != nil {
			return Record{}, &ReplayError{Line: 1, Err: err}
		}
		return Record{}, &ReplayError{Line: 1, Err: bound.Missing("trace record")}
	}
	e, err := eventlog.Decode(sc.Bytes())
	if err != nil {
		return Record{}, &ReplayError{Line: 1, Err: err}
	}
	if e.Kind() != KindTraceRecord {
		return Record{}, &ReplayError{Line: 1, Err: bound.Malformedf("event.kind", "not a trace record")}
	}
	raw, _ := e.Payload().(eventlog.Raw)
	var v struct {
		PairID    string            `json:"pair_id"`
		Providers map[string]string `json:"providers"`
		Parent    *struct {
			TraceID string `json:"trace_id"`
			SpanID  string `json:"span_id"`
			Sampled bool   `json:"sampled"`
		} `json:"parent"`
	}
	if err := json.Unmarshal(raw.Bytes(), &v); err != nil {
		return Record{}, &ReplayError{Line: 1, Err: bound.Malformedf("trace record", "not the record's JSON")}
	}
	rec := Record{PairID: v.PairID, Providers: v.Providers}
	if err := id.Check("record.pair_id", rec.PairID); err != nil {
		return Record{}, &ReplayError{Line: 1, Err: err}
	}
	if len(rec.Providers) > 2 {
		return Record{}, &ReplayError{Line: 1, Err: bound.Count("record.providers", len(rec.Providers), 2)}
	}
	for role, name := range rec.Providers {
		if err := errors.Join(bound.Name("record.providers[]", role), bound.Name("record.providers[]", name)); err != nil {
			return Record{}, &ReplayError{Line: 1, Err: err}
		}
	}
	if p := v.Parent; p != nil {
		tid, err1 := trace.TraceIDFromHex(p.TraceID)
		sid, err2 := trace.SpanIDFromHex(p.SpanID)
		if err1 != nil || err2 != nil {
			return Record{}, &ReplayError{Line: 1, Err: bound.Malformedf("record.parent", "not a valid span context")}
		}
		var flags trace.TraceFlags
		if p.Sampled {
			flags = trace.FlagsSampled
		}
		rec.Parent = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
	}
	return rec, nil
}

// ContinueRecord makes the next drawing of the record's pair continue the
// span it continued live (Continue), if any.
func (t *Telemetry) ContinueRecord(ctx context.Context, r Record) {
	if r.Parent.IsValid() {
		t.Continue(trace.ContextWithRemoteSpanContext(ctx, r.Parent), r.PairID)
	}
}
