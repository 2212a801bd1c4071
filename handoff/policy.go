package handoff

import (
	"maps"
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/message"
)

// Over says what happens to a handoff whose content is over the bound.
type Over uint8

const (
	// Reject makes Build fail with a *bound.Error (errors.Is
	// bound.ErrExceeded) naming the field and the limit.
	Reject Over = iota + 1
	// Cut keeps the start of the answer and appends CutMarker, so the
	// next worker can see that the answer was cut.
	Cut
)

func (o Over) String() string {
	switch o {
	case Reject:
		return "reject"
	case Cut:
		return "cut"
	}
	return "over(" + strconv.Itoa(int(o)) + ")"
}

// Defaults and limits of a Policy.
const (
	// DefaultMaxBytes bounds a handoff message when Config.MaxBytes is 0.
	DefaultMaxBytes = 64 << 10
	// DefaultTaskHeading introduces the task.
	DefaultTaskHeading = "Task"
	// DefaultDoneMarker is the line that means approval.
	DefaultDoneMarker = "APPROVED"
	// MaxHeadingBytes bounds a heading and the done marker.
	MaxHeadingBytes = 128
	// MaxHeadings bounds Config.Headings.
	MaxHeadings = 16
	// CutMarker ends an answer that Cut shortened.
	CutMarker = "\n[cut: the answer was longer than the handoff bound]"
)

// Config is the input to NewPolicy. The zero Config is a valid policy with
// the defaults.
type Config struct {
	// MaxBytes bounds the whole message text, task and headings included:
	// 1..bound.MaxMessageBytes, 0 for DefaultMaxBytes.
	MaxBytes int
	// Over is what happens to content over MaxBytes; 0 means Reject.
	Over Over
	// TaskHeading introduces the pair's task; "" means DefaultTaskHeading.
	TaskHeading string
	// Headings maps the role that answered to the heading its answer gets,
	// e.g. {"reviewer": "Reviewer feedback"}. A role without an entry gets
	// "Answer from <role>". NewPolicy copies the map.
	Headings map[string]string
	// DoneMarker is the line that means approval; "" means
	// DefaultDoneMarker.
	DoneMarker string
}

// Policy is a validated, immutable handoff policy. The zero Policy is
// invalid; orchestrators treat it as "use NewPolicy(Config{})".
type Policy struct {
	maxBytes    int
	over        Over
	taskHeading string
	headings    map[string]string // never handed out, never written after NewPolicy
	marker      string
}

// NewPolicy validates cfg and returns the policy. Headings and the marker
// are single lines of at most MaxHeadingBytes.
func NewPolicy(cfg Config) (Policy, error) {
	p := Policy{maxBytes: cfg.MaxBytes, over: cfg.Over, taskHeading: cfg.TaskHeading, marker: cfg.DoneMarker}
	switch {
	case p.maxBytes == 0:
		p.maxBytes = DefaultMaxBytes
	case p.maxBytes < 0:
		return Policy{}, bound.Malformedf("handoff.max_bytes", "must not be negative")
	case p.maxBytes > bound.MaxMessageBytes:
		return Policy{}, bound.Bytes("handoff.max_bytes", p.maxBytes, bound.MaxMessageBytes)
	}
	switch p.over {
	case 0:
		p.over = Reject
	case Reject, Cut:
	default:
		return Policy{}, bound.Malformedf("handoff.over", "must be Reject or Cut")
	}
	if p.taskHeading == "" {
		p.taskHeading = DefaultTaskHeading
	}
	if err := checkLine("handoff.task_heading", p.taskHeading); err != nil {
		return Policy{}, err
	}
	if p.marker == "" {
		p.marker = DefaultDoneMarker
	}
	if err := checkLine("handoff.done_marker", p.marker); err != nil {
		return Policy{}, err
	}
	if strings.TrimSpace(p.marker) != p.marker {
		return Policy{}, bound.Malformedf("handoff.done_marker", "must not start or end with white space")
	}
	if err := bound.Count("handoff.headings", len(cfg.Headings), MaxHeadings); err != nil {
		return Policy{}, err
	}
	for role, h := range cfg.Headings {
		if err := bound.Name("handoff.headings[]", role); err != nil {
			return Policy{}, err
		}
		if err := checkLine("handoff.headings[]", h); err != nil {
			return Policy{}, err
		}
	}
	p.headings = maps.Clone(cfg.Headings)
	return p, nil
}

// checkLine checks a heading or marker: one line of text, never empty.
func checkLine(field, s string) error {
	if err := bound.Text(field, s, MaxHeadingBytes); err != nil {
		return err
	}
	if strings.ContainsAny(s, "\r\n") {
		return bound.Malformedf(field, "must be a single line")
	}
	return nil
}

// IsZero reports whether p is the zero Policy.
func (p Policy) IsZero() bool { return p.over == 0 }

// MaxBytes returns the bound on a handoff message.
func (p Policy) MaxBytes() int { return p.maxBytes }

// Over returns what happens to content over the bound.
func (p Policy) Over() Over { return p.over }

// TaskHeading returns the heading of the task.
func (p Policy) TaskHeading() string { return p.taskHeading }

// DoneMarker returns the line that means approval.
func (p Policy) DoneMarker() string { return p.marker }

// Heading returns the heading of an answer from role.
func (p Policy) Heading(role string) string {
	if h, ok := p.headings[role]; ok {
		return h
	}
	return "Answer from " + role
}

// Done reports whether answer approves: whether one of its lines, with
// surrounding white space removed, is exactly the done marker. "NOT
// APPROVED" therefore does not approve.
func (p Policy) Done(answer message.Message) bool {
	if p.marker == "" {
		return false
	}
	for line := range strings.Lines(answer.Text()) {
		if strings.TrimSpace(line) == p.marker {
			return true
		}
	}
	return false
}
