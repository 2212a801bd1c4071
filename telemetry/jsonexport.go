package telemetry

import (
	"context"
	"encoding/json"
	"io"
	"strconv"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// MaxJSONSpans bounds the spans a JSONExporter holds before it writes
// them out as a line of their own.
const MaxJSONSpans = 1 << 16

// JSONExporter writes spans as OTLP JSON (the protobuf JSON mapping of an
// ExportTraceServiceRequest, as OTLP/HTTP with JSON bodies and the
// collector's file exporter use): it holds the spans it is given, and
// writes them as one line when a root span ends (a pair's invoke_workflow
// span, which ends after the rest of its pair, or one continuing a remote
// parent), at Flush and at Shutdown. So a pair drawn alone is one JSON
// document that a collector's otlpjsonfile receiver, or a backend's
// import, can read, and a server drawing pair after pair writes each as
// it ends. Spans of the same trace are written in the order they ended.
// It is a sdktrace.SpanExporter; use it with sdktrace.WithSyncer.
type JSONExporter struct {
	mu    sync.Mutex
	w     io.Writer
	spans []sdktrace.ReadOnlySpan
	err   error
}

// NewJSONExporter returns an exporter writing to w.
func NewJSONExporter(w io.Writer) *JSONExporter { return &JSONExporter{w: w} }

// ExportSpans holds spans until a root span ends, writing early past
// MaxJSONSpans.
func (x *JSONExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.spans = append(x.spans, spans...)
	if len(x.spans) >= MaxJSONSpans {
		return x.writeLocked()
	}
	for _, s := range spans {
		if p := s.Parent(); !p.IsValid() || p.IsRemote() {
			return x.writeLocked()
		}
	}
	return nil
}

// Flush writes the held spans as one line. (A tracer provider's
// ForceFlush does not reach an exporter; its Shutdown does.)
func (x *JSONExporter) Flush() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.writeLocked()
}

// Shutdown writes the held spans.
func (x *JSONExporter) Shutdown(context.Context) error { return x.Flush() }

func (x *JSONExporter) writeLocked() error {
	if len(x.spans) == 0 || x.err != nil {
		x.spans = x.spans[:0]
		return x.err
	}
	b, err := json.Marshal(otlpRequest(x.spans))
	x.spans = x.spans[:0]
	if err == nil {
		_, err = x.w.Write(append(b, '\n'))
	}
	x.err = err
	return err
}

// The OTLP JSON mapping: IDs in hex, 64-bit integers as strings, enums as
// numbers, and camelCase field names.
type (
	jsonRequest struct {
		ResourceSpans []jsonResourceSpans `json:"resourceSpans"`
	}
	jsonResourceSpans struct {
		Resource   jsonResource     `json:"resource"`
		ScopeSpans []jsonScopeSpans `json:"scopeSpans"`
		SchemaURL  string           `json:"schemaUrl,omitempty"`
	}
	jsonResource struct {
		Attributes []jsonKeyValue `json:"attributes"`
	}
	jsonScopeSpans struct {
		Scope     jsonScope  `json:"scope"`
		Spans     []jsonSpan `json:"spans"`
		SchemaURL string     `json:"schemaUrl,omitempty"`
	}
	jsonScope struct {
		Name    string `json:"name"`
		Version string `json:"version,omitempty"`
	}
	jsonSpan struct {
		TraceID      string         `json:"traceId"`
		SpanID       string         `json:"spanId"`
		TraceState   string         `json:"traceState,omitempty"`
		ParentSpanID string         `json:"parentSpanId,omitempty"`
		Flags        uint32         `json:"flags,omitempty"`
		Name         string         `json:"name"`
		Kind         int            `json:"kind"`
		Start        string         `json:"startTimeUnixNano"`
		End          string         `json:"endTimeUnixNano"`
		Attributes   []jsonKeyValue `json:"attributes,omitempty"`
		Events       []jsonEvent    `json:"events,omitempty"`
		Links        []jsonLink     `json:"links,omitempty"`
		Status       jsonStatus     `json:"status"`
	}
	jsonEvent struct {
		Time       string         `json:"timeUnixNano"`
		Name       string         `json:"name"`
		Attributes []jsonKeyValue `json:"attributes,omitempty"`
	}
	jsonLink struct {
		TraceID    string         `json:"traceId"`
		SpanID     string         `json:"spanId"`
		Attributes []jsonKeyValue `json:"attributes,omitempty"`
	}
	jsonStatus struct {
		Message string `json:"message,omitempty"`
		Code    int    `json:"code,omitempty"`
	}
	jsonKeyValue struct {
		Key   string    `json:"key"`
		Value jsonValue `json:"value"`
	}
	jsonValue struct {
		String *string     `json:"stringValue,omitempty"`
		Bool   *bool       `json:"boolValue,omitempty"`
		Int    *string     `json:"intValue,omitempty"`
		Double *float64    `json:"doubleValue,omitempty"`
		Array  *jsonValues `json:"arrayValue,omitempty"`
	}
	jsonValues struct {
		Values []jsonValue `json:"values"`
	}
)

// otlpRequest groups spans by resource and scope, keeping their order.
func otlpRequest(spans []sdktrace.ReadOnlySpan) jsonRequest {
	var req jsonRequest
	var last *resource.Resource
	for i, s := range spans {
		res := s.Resource()
		if i == 0 || !last.Equal(res) {
			rs := jsonResourceSpans{Resource: jsonResource{Attributes: []jsonKeyValue{}}}
			if res != nil {
				rs.Resource.Attributes = append(rs.Resource.Attributes, keyValues(res.Attributes())...)
				rs.SchemaURL = res.SchemaURL()
			}
			req.ResourceSpans = append(req.ResourceSpans, rs)
			last = res
		}
		rs := &req.ResourceSpans[len(req.ResourceSpans)-1]
		scope := s.InstrumentationScope()
		n := len(rs.ScopeSpans)
		if n == 0 || rs.ScopeSpans[n-1].Scope.Name != scope.Name || rs.ScopeSpans[n-1].Scope.Version != scope.Version {
			rs.ScopeSpans = append(rs.ScopeSpans, jsonScopeSpans{
				Scope: jsonScope{Name: scope.Name, Version: scope.Version}, SchemaURL: scope.SchemaURL})
			n++
		}
		rs.ScopeSpans[n-1].Spans = append(rs.ScopeSpans[n-1].Spans, jsonSpanOf(s))
	}
	return req
}

func jsonSpanOf(s sdktrace.ReadOnlySpan) jsonSpan {
	sc := s.SpanContext()
	js := jsonSpan{
		TraceID:    sc.TraceID().String(),
		SpanID:     sc.SpanID().String(),
		TraceState: sc.TraceState().String(),
		Flags:      uint32(sc.TraceFlags()) | flagsFor(s.Parent()),
		Name:       s.Name(),
		Kind:       int(s.SpanKind()),
		Start:      nanos(s.StartTime().UnixNano()),
		End:        nanos(s.EndTime().UnixNano()),
		Attributes: keyValues(s.Attributes()),
	}
	if p := s.Parent(); p.SpanID().IsValid() {
		js.ParentSpanID = p.SpanID().String()
	}
	for _, e := range s.Events() {
		js.Events = append(js.Events, jsonEvent{Time: nanos(e.Time.UnixNano()), Name: e.Name, Attributes: keyValues(e.Attributes)})
	}
	for _, l := range s.Links() {
		js.Links = append(js.Links, jsonLink{TraceID: l.SpanContext.TraceID().String(),
			SpanID: l.SpanContext.SpanID().String(), Attributes: keyValues(l.Attributes)})
	}
	switch st := s.Status(); st.Code {
	case codes.Error:
		js.Status = jsonStatus{Code: 2, Message: st.Description}
	case codes.Ok:
		js.Status = jsonStatus{Code: 1}
	}
	return js
}

// flagsFor sets the OTLP span flags that say whether the parent is known
// to be remote (bits 8 and 9 of the OTLP Span.flags).
func flagsFor(p trace.SpanContext) uint32 {
	if !p.IsValid() {
		return 0
	}
	if p.IsRemote() {
		return 0x300
	}
	return 0x100
}

func nanos(n int64) string { return strconv.FormatInt(n, 10) }

func keyValues(kvs []attribute.KeyValue) []jsonKeyValue {
	if len(kvs) == 0 {
		return nil
	}
	out := make([]jsonKeyValue, 0, len(kvs))
	for _, kv := range kvs {
		out = append(out, jsonKeyValue{Key: string(kv.Key), Value: jsonValueOf(kv.Value)})
	}
	return out
}

func jsonValueOf(v attribute.Value) jsonValue {
	switch v.Type() {
	case attribute.BOOL:
		b := v.AsBool()
		return jsonValue{Bool: &b}
	case attribute.INT64:
		s := strconv.FormatInt(v.AsInt64(), 10)
		return jsonValue{Int: &s}
	case attribute.FLOAT64:
		f := v.AsFloat64()
		return jsonValue{Double: &f}
	case attribute.BOOLSLICE:
		var vs []jsonValue
		for _, b := range v.AsBoolSlice() {
			vs = append(vs, jsonValueOf(attribute.BoolValue(b)))
		}
		return jsonValue{Array: &jsonValues{Values: vs}}
	case attribute.INT64SLICE:
		var vs []jsonValue
		for _, n := range v.AsInt64Slice() {
			vs = append(vs, jsonValueOf(attribute.Int64Value(n)))
		}
		return jsonValue{Array: &jsonValues{Values: vs}}
	case attribute.FLOAT64SLICE:
		var vs []jsonValue
		for _, f := range v.AsFloat64Slice() {
			vs = append(vs, jsonValueOf(attribute.Float64Value(f)))
		}
		return jsonValue{Array: &jsonValues{Values: vs}}
	case attribute.STRINGSLICE:
		vs := []jsonValue{}
		for _, s := range v.AsStringSlice() {
			vs = append(vs, jsonValueOf(attribute.StringValue(s)))
		}
		return jsonValue{Array: &jsonValues{Values: vs}}
	}
	s := v.Emit()
	return jsonValue{String: &s}
}

var _ sdktrace.SpanExporter = (*JSONExporter)(nil)
