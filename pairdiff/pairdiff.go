package pairdiff

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Bounds of the input: a line is one event, at most an event's size, and
// a timeline holds at most MaxEvents of them.
const (
	MaxLineBytes = eventlog.MaxEventBytes + 1024 // the envelope around the largest payload
	MaxEvents    = 1 << 20
	// DefaultContext is how many events of context a report shows on
	// each side of the divergence.
	DefaultContext = 3
	// MaxContext bounds Options.Context.
	MaxContext = 100
	// maxFields bounds the differing fields a report lists.
	maxFields = 20
	// maxValue bounds how much of one value a report shows.
	maxValue = 160
)

// ErrMalformed is matched by every error about the input.
var ErrMalformed = errors.New("pairdiff: malformed timeline")

// InputError says which line of which timeline is malformed. It never
// quotes the line.
type InputError struct {
	Name   string // "A" or "B", or what the caller named the input
	Line   int    // 1-based
	Reason string
}

func (e *InputError) Error() string {
	return "pairdiff: " + e.Name + " line " + strconv.Itoa(e.Line) + ": " + e.Reason
}

func (e *InputError) Is(target error) bool { return target == ErrMalformed }

// Options say how to compare.
type Options struct {
	// Exact compares times and identifiers too.
	Exact bool
	// Context is the number of events shown on each side of the
	// divergence: 0 means DefaultContext, a negative value none.
	Context int
}

// Event is one line of a timeline.
type Event struct {
	Seq    uint64
	Kind   string
	Worker string // the worker of a relayed run event; empty for the pair's own
	Name   string // the tool's name, for a relayed tool event
	value  map[string]any
}

// Timeline is a parsed timeline.
type Timeline []Event

// Parse reads a timeline's JSON lines; name says which input an error is
// about. Blank lines are skipped.
func Parse(name string, r io.Reader) (Timeline, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxLineBytes)
	var tl Timeline
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		if len(tl) == MaxEvents {
			return nil, &InputError{Name: name, Line: n, Reason: "more than " + strconv.Itoa(MaxEvents) + " events"}
		}
		e, reason := parseLine(line)
		if reason != "" {
			return nil, &InputError{Name: name, Line: n, Reason: reason}
		}
		tl = append(tl, e)
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &InputError{Name: name, Line: len(tl) + 1, Reason: "a line is longer than " + strconv.Itoa(MaxLineBytes) + " bytes"}
		}
		return nil, err
	}
	return tl, nil
}

func parseLine(line []byte) (Event, string) {
	d := json.NewDecoder(bytes.NewReader(line))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil || v == nil {
		return Event{}, "not a JSON object"
	}
	if d.More() {
		return Event{}, "more than one JSON value"
	}
	kind, ok := v["kind"].(string)
	if !ok || kind == "" {
		return Event{}, "no kind"
	}
	e := Event{Kind: kind, value: v}
	if n, ok := v["seq"].(json.Number); ok {
		s, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil {
			return Event{}, "seq is not a sequence number"
		}
		e.Seq = s
	}
	// The relayed envelope of the pair timeline's schema
	// (orchestrator.FieldWorker, FieldPayload), spelled here because
	// orchestrator is a layer above.
	if p, ok := v["payload"].(map[string]any); ok {
		if w, ok := p["worker"].(string); ok {
			e.Worker = w
		}
		if inner, ok := p["payload"].(map[string]any); ok && strings.HasPrefix(kind, "tool.") {
			e.Name, _ = inner["name"].(string)
		}
	}
	return e, ""
}

// FieldDiff is one field that differs between two events: its path in
// the event's payload ("kind" and "worker" for those), and each side's
// value as JSON; a missing field is "(absent)".
type FieldDiff struct {
	Path string
	A, B string
}

// Divergence is the first place two timelines differ.
type Divergence struct {
	// Index is the 0-based position of the first event that differs.
	Index int
	// LenA and LenB are the timelines' lengths.
	LenA, LenB int
	// A and B are the differing events; nil on the side that ended.
	A, B *Event
	// Fields are the differing fields, in path order (at most 20), and
	// More how many more there are.
	Fields []FieldDiff
	More   int
	// Before holds the matching events before Index (from A); AfterA and
	// AfterB the events after it on each side.
	Before         []Event
	AfterA, AfterB []Event
}

// Compare returns the first divergence of a and b, or nil when they match.
func Compare(a, b Timeline, o Options) *Divergence {
	n := min(len(a), len(b))
	i := 0
	var fields []FieldDiff
	for ; i < n; i++ {
		if fields = diffEvents(&a[i], &b[i], o.Exact); len(fields) > 0 {
			break
		}
	}
	if i == n && len(a) == len(b) {
		return nil
	}
	ctx := o.Context
	switch {
	case ctx == 0:
		ctx = DefaultContext
	case ctx < 0:
		ctx = 0
	}
	ctx = min(ctx, MaxContext)
	d := &Divergence{Index: i, LenA: len(a), LenB: len(b), Before: slices.Clone(a[max(0, i-ctx):i])}
	if i < len(a) {
		d.A = &a[i]
		d.AfterA = slices.Clone(a[i+1 : min(len(a), i+1+ctx)])
	}
	if i < len(b) {
		d.B = &b[i]
		d.AfterB = slices.Clone(b[i+1 : min(len(b), i+1+ctx)])
	}
	if len(fields) > maxFields {
		d.More = len(fields) - maxFields
		fields = fields[:maxFields]
	}
	d.Fields = fields
	return d
}

// ignored reports whether a field is a time or an identifier, which a
// comparison that is not exact leaves out.
func ignored(key string) bool {
	return key == "time" || key == "seq" || key == "id" || strings.HasSuffix(key, "_id")
}

// diffEvents returns the fields in which a and b differ.
func diffEvents(a, b *Event, exact bool) []FieldDiff {
	var out []FieldDiff
	if a.Kind != b.Kind {
		out = append(out, FieldDiff{Path: "kind", A: quote(a.Kind), B: quote(b.Kind)})
	}
	if a.Worker != b.Worker {
		out = append(out, FieldDiff{Path: "worker", A: quote(a.Worker), B: quote(b.Worker)})
	}
	if exact {
		for _, k := range []string{"seq", "time"} {
			if !equal(a.value[k], b.value[k]) {
				out = append(out, FieldDiff{Path: k, A: show(a.value[k], true), B: show(b.value[k], true)})
			}
		}
	}
	pa, _ := a.value["payload"].(map[string]any)
	pb, _ := b.value["payload"].(map[string]any)
	diffObjects("", pa, pb, exact, &out)
	return out
}

func diffObjects(prefix string, a, b map[string]any, exact bool, out *[]FieldDiff) {
	keys := make([]string, 0, len(a)+len(b))
	for k := range a {
		keys = append(keys, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if (!exact && ignored(k)) || (prefix == "" && k == "worker") {
			continue
		}
		path := k
		if prefix != "" {
			path = prefix + "." + k
		}
		va, oka := a[k]
		vb, okb := b[k]
		oa, isObjA := va.(map[string]any)
		ob, isObjB := vb.(map[string]any)
		if isObjA && isObjB {
			diffObjects(path, oa, ob, exact, out)
			continue
		}
		if oka == okb && equal(va, vb) {
			continue
		}
		*out = append(*out, FieldDiff{Path: path, A: show(va, oka), B: show(vb, okb)})
	}
}

func equal(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// show is a value as a report prints it: JSON (which escapes control
// characters), cut at maxValue bytes.
func show(v any, present bool) string {
	if !present {
		return "(absent)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "(unprintable)"
	}
	if len(b) > maxValue {
		cut := maxValue
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		b = append(b[:cut:cut], "…"...)
	}
	return escapeUnprintable(string(b))
}

// escapeUnprintable writes every rune JSON leaves as it is but a terminal
// would act on (bidirectional overrides, other format characters) as
// \uXXXX.
func escapeUnprintable(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r != utf8.RuneError && !unicode.IsPrint(r) && r >= 0x80 {
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

func quote(s string) string { return show(s, true) }

// Report writes d as a reader wants it: where the timelines part, the
// matching events before, both sides' events at the divergence with the
// fields that differ, and each side's events after. A nil d reports that
// the timelines match.
func (d *Divergence) Report(w io.Writer) error {
	if d == nil {
		_, err := io.WriteString(w, "the timelines match\n")
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "first divergence at event %d (A has %d events, B has %d)\n", d.Index+1, d.LenA, d.LenB)
	for _, e := range d.Before {
		line(&b, " ", &e)
	}
	side := func(name string, e *Event) {
		if e == nil {
			fmt.Fprintf(&b, "%s   (ended after %d events)\n", name, d.Index)
			return
		}
		line(&b, name, e)
	}
	side("A", d.A)
	side("B", d.B)
	for _, f := range d.Fields {
		fmt.Fprintf(&b, "      %s: A %s, B %s\n", f.Path, f.A, f.B)
	}
	if d.More > 0 {
		fmt.Fprintf(&b, "      and %d more fields\n", d.More)
	}
	for _, e := range d.AfterA {
		line(&b, "A", &e)
	}
	for _, e := range d.AfterB {
		line(&b, "B", &e)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// String is the report as text.
func (d *Divergence) String() string {
	var b strings.Builder
	_ = d.Report(&b)
	return b.String()
}

func line(b *strings.Builder, mark string, e *Event) {
	l := fmt.Sprintf("%s %5d  %-18s %-8s %s", mark, e.Seq, printable(e.Kind), printable(e.Worker), printable(e.Name))
	b.WriteString(strings.TrimRight(l, " "))
	b.WriteByte('\n')
}

// printable quotes a name that holds anything but printable text, so
// that a recorded name cannot drive the terminal.
func printable(s string) string {
	for _, r := range s {
		if !unicode.IsPrint(r) || r == '"' || r == '\\' {
			return strconv.Quote(s)
		}
	}
	return s
}
