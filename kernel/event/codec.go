package event

import (
	"math"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// Each payload lists its fields once, in fields, for both encoding and
// measuring. AppendJSON and EncodedLen call it directly rather than through
// a shared generic helper: a call through an interface or type parameter
// would move the payload to the heap on every append.

// writeProblem writes a problem as {"code":…,"message":…}; the message is
// omitted when empty.
func writeProblem(o *eventlog.Object, name string, p problem.Problem) {
	o.Begin(name)
	o.String("code", p.Code())
	o.OptionalString("message", p.Message())
	o.End()
}

// writeOptionalProblem omits the zero problem.
func writeOptionalProblem(o *eventlog.Object, name string, p problem.Problem) {
	if !p.IsZero() {
		writeProblem(o, name, p)
	}
}

// reader wraps eventlog.ObjectReader with the checks payloads share. The
// first error sticks.
type reader struct {
	r   eventlog.ObjectReader
	err error
}

func (d *reader) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func field(name string) string { return "payload." + name }

func (d *reader) id(name string) string {
	s := d.r.String(name)
	if d.ok() {
		d.fail(id.Check(field(name), s))
	}
	return s
}

func (d *reader) optionalID(name string) string {
	s := d.r.OptionalString(name)
	if d.ok() && s != "" {
		d.fail(id.Check(field(name), s))
	}
	return s
}

// label reads a required short name: a tool, model or definition name, or a
// word such as an outcome. Its alphabet belongs to the package that defines
// it; here it is bounded text.
func (d *reader) label(name string) string {
	s := d.r.String(name)
	if d.ok() {
		d.fail(bound.Text(field(name), s, bound.MaxNameBytes))
	}
	return s
}

func (d *reader) optionalLabel(name string) string {
	s := d.r.OptionalString(name)
	if d.ok() {
		d.fail(bound.OptionalText(field(name), s, bound.MaxNameBytes))
	}
	return s
}

func (d *reader) text(name string, limit int) string {
	s := d.r.String(name)
	if d.ok() {
		d.fail(bound.Text(field(name), s, limit))
	}
	return s
}

func (d *reader) optionalText(name string, limit int) string {
	s := d.r.OptionalString(name)
	if d.ok() {
		d.fail(bound.OptionalText(field(name), s, limit))
	}
	return s
}

func (d *reader) count(name string) int {
	v := d.r.Int(name)
	if d.ok() && (v < 0 || v > math.MaxInt32) {
		d.fail(bound.Malformedf(field(name), "must be from 0 to 2^31-1"))
	}
	return int(v)
}

func (d *reader) tokens(name string) int64 {
	v := d.r.Int(name)
	if d.ok() && v < 0 {
		d.fail(bound.Malformedf(field(name), "must not be negative"))
	}
	return v
}

func (d *reader) bool(name string) bool { return d.r.Bool(name) }

func (d *reader) problem(name string) problem.Problem {
	d.r.Begin(name)
	return d.problemBody(name)
}

func (d *reader) optionalProblem(name string) problem.Problem {
	if !d.r.OptionalBegin(name) {
		return problem.Problem{}
	}
	return d.problemBody(name)
}

func (d *reader) problemBody(name string) problem.Problem {
	code := d.r.String("code")
	msg := d.r.OptionalString("message")
	d.r.End()
	if !d.ok() {
		return problem.Problem{}
	}
	p, err := problem.New(code, msg)
	if err != nil {
		d.fail(bound.Malformedf(field(name), "not a valid problem: "+err.Error()))
	}
	return p
}

func (d *reader) ok() bool { return d.err == nil }

// close finishes the object and returns the first error.
func (d *reader) close() error {
	if err := d.r.Close(); err != nil {
		return err
	}
	return d.err
}
