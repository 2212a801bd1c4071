package orchestrator

import (
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/handoff"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/workers"
)

// Pattern is how a pair's two workers take turns (O4).
type Pattern uint8

const (
	// Relay runs the first worker on the task, then the second worker on
	// the first one's answer, once.
	Relay Pattern = iota + 1
	// ReviewLoop runs the first worker, then the second on its answer; if
	// the second approves (handoff.Policy.Done) the pair ends approved,
	// otherwise the first worker runs again with the second's feedback,
	// until approval or a limit.
	ReviewLoop
)

func (p Pattern) String() string {
	switch p {
	case Relay:
		return "relay"
	case ReviewLoop:
		return "review_loop"
	}
	return "pattern(" + strconv.Itoa(int(p)) + ")"
}

// Delivery says when worker run events enter the pair timeline.
type Delivery uint8

const (
	// Live relays each run event as the run commits it, through a required
	// observer on the worker's engine: a subscriber sees the run as it
	// happens, and a timeline observer applies backpressure to the run.
	// It costs what the engine's observer path costs per event.
	Live Delivery = iota + 1
	// AfterRun copies a run's events into the timeline, in order and with
	// their run sequences, as soon as the run has ended. The worker
	// engines then run without observers, which is markedly cheaper; a run
	// whose own log evicted events before the copy loses them (raise the
	// engine's Limits.MaxEvents, or use Live).
	AfterRun
)

func (d Delivery) String() string {
	switch d {
	case Live:
		return "live"
	case AfterRun:
		return "after_run"
	}
	return "delivery(" + strconv.Itoa(int(d)) + ")"
}

// Budget bounds what a pair may consume, summed over both workers. A zero
// field means no limit.
type Budget struct {
	// Tokens bounds input plus output tokens. Once the pair has used this
	// many, no further model operation is started.
	Tokens int64
	// ToolCalls bounds the tool calls the models request; the pair stops
	// at the first request over the bound, before that call runs.
	ToolCalls int64
	// WallTime bounds the pair's duration from its lease.
	WallTime time.Duration
}

// TimelineConfig bounds and observes the pair timeline (O7).
type TimelineConfig struct {
	// MaxEvents and MaxBytes bound the retained timeline events. Defaults
	// DefaultTimelineEvents and DefaultTimelineBytes; at least 16 events
	// and 64 KiB.
	MaxEvents int
	MaxBytes  int
	// MaxLag is how far a subscriber may fall behind; default MaxEvents.
	MaxLag int
	// Required observers are told of every timeline event in order and
	// may block; BestEffort ones get bounded mailboxes (see eventlog).
	Required   []eventlog.Observer
	BestEffort []eventlog.Observer
	// Mailbox is each best-effort observer's mailbox size; 0 means 64.
	Mailbox int
	// Delivery is Live (the default) or AfterRun.
	Delivery Delivery
	// Journal writes each completed model operation's output into the
	// timeline (pair.model_output) before its run commits it, so that
	// Resume can answer it again instead of asking the model twice.
	Journal bool
}

// Defaults and limits of Config.
const (
	DefaultMaxRounds       = 3
	MaxRounds              = 1000
	DefaultTimelineEvents  = 16384
	DefaultTimelineBytes   = 16 << 20
	DefaultFinalizeTimeout = engine.DefaultFinalizeTimeout
)

// Config describes one pair. Start and Run copy it.
type Config struct {
	// ID names the pair: an identifier (id.Check) the host chooses.
	ID string
	// Plans is the plan source of the pair. The pair leases its current
	// plan once, and both workers' engines are built on this source.
	Plans plan.Source
	// Clock times the pair's own events; nil means the first worker's
	// engine clock.
	Clock engine.Clock
	// First and Second are the two workers: for example writer and
	// reviewer, or planner and executor. Their roles must differ. Each
	// gets its own engine built from its Engine config, whose Plans must
	// be nil or Plans; the pair adds its relay observer (Live delivery)
	// and its budget decorator around the provider (when a token or
	// tool-call budget is set).
	First, Second workers.Config
	// Pattern is Relay or ReviewLoop. Required.
	Pattern Pattern
	// Task is the first worker's first input, and is repeated in every
	// handoff. Required.
	Task string
	// Policy frames and bounds handoffs and defines approval. The zero
	// Policy means handoff.NewPolicy with the defaults, and for a
	// ReviewLoop the heading "Reviewer feedback" for the second worker.
	Policy handoff.Policy
	// MaxRounds bounds the rounds of a ReviewLoop: 1..MaxRounds, 0 for
	// DefaultMaxRounds. A Relay has one round.
	MaxRounds int
	// Budget bounds tokens, tool calls and wall time over both workers.
	Budget Budget
	// OnLimit is StopAtLimit (the default) or AnswerAtLimit: when max
	// rounds or a budget ends the pair, the worker holding the latest
	// draft gets one last model operation, without tools, for its best
	// final answer (finalanswer.go).
	OnLimit OnLimit
	// FinalAnswerReserve is the share of the token and wall-time budgets
	// kept back for the final answer: more than 0 and at most
	// MaxFinalAnswerReserve; 0 means DefaultFinalAnswerReserve. Only with
	// AnswerAtLimit.
	FinalAnswerReserve float64
	Timeline           TimelineConfig
	// Approval says which tool calls wait for a person's approval before
	// they run, asked through each worker engine's interaction broker
	// (Engine.Broker; Approvals is one). The zero value asks about none.
	Approval ApprovalConfig
	// FinalizeTimeout bounds the wait for timeline observers on each pair
	// event and, when there are observers, the lease release; none of it
	// can be cut by the caller's cancellation. A lease also bounds its own
	// release (plan.LeaseConfig.ReleaseTimeout), as in a run's
	// finalization. Default DefaultFinalizeTimeout, at most
	// engine.MaxFinalizeTimeout.
	FinalizeTimeout time.Duration
	// Started, if set, is called once with the pair, on the goroutine that
	// plays it, as soon as pair.started is in the timeline and before the
	// first run. With Run it hands the pair to others (to Subscribe or
	// Cancel) while the caller's goroutine plays it. It is not called
	// when appending pair.started fails, an observer refusing it included:
	// the pair then ends at once. It must not block; a panic in it ends
	// the pair with ReasonInfrastructure before any run.
	Started func(*Pair)
}

// defaultPolicy is the zero Config's policy, built once: a Policy is an
// immutable value.
var defaultPolicy = func() handoff.Policy {
	p, err := handoff.NewPolicy(handoff.Config{})
	if err != nil {
		panic(err)
	}
	return p
}()

// settings is what a running pair keeps of its Config: validated, with
// the defaults filled in, and without the worker configs it no longer
// needs once the workers are built.
//
// A Team's pairs share one settings; what each pair brings of its own is
// its task.
type settings struct {
	Plans           plan.Source
	Clock           engine.Clock
	Roles           *[2]string // apart, as every relayed event points at one: it must keep no Pair or Team alive
	Pattern         Pattern
	Policy          handoff.Policy
	MaxRounds       int
	Budget          Budget // what the pattern may spend: the final answer's reserve kept back
	Final           finalSettings
	Delivery        Delivery
	Journal         bool
	FinalizeTimeout time.Duration
	Started         func(*Pair)
	Approval        ApprovalConfig
}

var (
	roleFields   = [2]string{"pair.first.role", "pair.second.role"}
	planFields   = [2]string{"pair.first.engine.plans", "pair.second.engine.plans"}
	brokerFields = [2]string{"pair.first.engine.broker", "pair.second.engine.broker"}
)

// task is what one pair brings to its settings: its ID, and its task as
// given and as the first worker's first message.
type task struct {
	pairID string
	text   string
	msg    message.Message
}

// newTask validates a pair's ID and task.
func newTask(pairID, text string) (task, error) {
	if err := id.Check("pair.id", pairID); err != nil {
		return task{}, err
	}
	m, err := message.User(text)
	if err != nil {
		return task{}, bound.Text("pair.task", text, bound.MaxMessageBytes) // names the field
	}
	return task{pairID: pairID, text: text, msg: m}, nil
}

// normalize validates c and fills in its defaults in place.
func (c *Config) normalize() (settings, task, error) {
	if err := id.Check("pair.id", c.ID); err != nil {
		return settings{}, task{}, err
	}
	n, err := c.normalizeShared()
	if err != nil {
		return n, task{}, err
	}
	t, err := newTask(c.ID, c.Task)
	return n, t, err
}

// normalizeShared validates and fills in everything but the ID and the
// task, which each pair of a Team brings.
func (c *Config) normalizeShared() (settings, error) {
	var n settings
	if c.Plans == nil {
		return n, bound.Missing("pair.plans")
	}
	if c.First.Role == c.Second.Role {
		return n, bound.Conflicting("pair.second.role", "the two workers need different roles")
	}
	for i, w := range [2]*workers.Config{&c.First, &c.Second} {
		// Whole field names, so that a valid config builds no strings.
		if err := bound.Name(roleFields[i], w.Role); err != nil {
			return n, err
		}
		if w.Engine.Plans != nil && !sameSource(w.Engine.Plans, c.Plans) {
			return n, bound.Conflicting(planFields[i], "both workers are built on the pair's plan source")
		}
	}
	if c.Clock == nil {
		c.Clock = c.First.Engine.Clock
	}
	if c.Clock == nil {
		return n, bound.Missing("pair.clock")
	}
	switch c.Pattern {
	case Relay, ReviewLoop:
	case 0:
		return n, bound.Missing("pair.pattern")
	default:
		return n, bound.Malformedf("pair.pattern", "must be Relay or ReviewLoop")
	}
	var err error
	if c.Policy.IsZero() {
		c.Policy = defaultPolicy
		if c.Pattern == ReviewLoop {
			hc := handoff.Config{Headings: map[string]string{c.Second.Role: "Reviewer feedback"}}
			if c.Policy, err = handoff.NewPolicy(hc); err != nil {
				return n, err
			}
		}
	}
	switch {
	case c.MaxRounds == 0:
		c.MaxRounds = DefaultMaxRounds
	case c.MaxRounds < 0:
		return n, bound.Malformedf("pair.max_rounds", "must not be negative")
	case c.MaxRounds > MaxRounds:
		return n, bound.Count("pair.max_rounds", c.MaxRounds, MaxRounds)
	}
	if c.Pattern == Relay {
		c.MaxRounds = 1
	}
	if c.Budget.Tokens < 0 || c.Budget.ToolCalls < 0 || c.Budget.WallTime < 0 {
		return n, bound.Malformedf("pair.budget", "limits must not be negative")
	}
	final, work, err := c.normalizeFinal()
	if err != nil {
		return n, err
	}
	if err := c.Timeline.normalize(); err != nil {
		return n, err
	}
	if err := c.Approval.normalize(); err != nil {
		return n, err
	}
	if !c.Approval.Policy.IsNever() {
		// Without a broker every question fails and no asked-about call
		// could ever run: refuse the pair instead.
		for i, w := range [2]*workers.Config{&c.First, &c.Second} {
			if w.Engine.Broker == nil {
				return n, bound.Missing(brokerFields[i])
			}
		}
	}
	switch {
	case c.FinalizeTimeout == 0:
		c.FinalizeTimeout = DefaultFinalizeTimeout
	case c.FinalizeTimeout < 0 || c.FinalizeTimeout > engine.MaxFinalizeTimeout:
		return n, bound.Malformedf("pair.finalize_timeout", "must be between 0 and 5m")
	}
	return settings{
		Plans: c.Plans, Clock: c.Clock, Roles: &[2]string{c.First.Role, c.Second.Role},
		Pattern: c.Pattern, Policy: c.Policy, MaxRounds: c.MaxRounds,
		Budget: work, Final: final, Delivery: c.Timeline.Delivery, Journal: c.Timeline.Journal, FinalizeTimeout: c.FinalizeTimeout,
		Started: c.Started, Approval: c.Approval,
	}, nil
}

func (t *TimelineConfig) normalize() error {
	if t.MaxEvents < 0 || t.MaxBytes < 0 || t.MaxLag < 0 || t.Mailbox < 0 {
		return bound.Malformedf("pair.timeline", "limits must not be negative")
	}
	if t.MaxEvents == 0 {
		t.MaxEvents = DefaultTimelineEvents
	}
	if t.MaxBytes == 0 {
		t.MaxBytes = DefaultTimelineBytes
	}
	switch {
	case t.MaxEvents < minLogEvents:
		return bound.Malformedf("pair.timeline.max_events", "must be at least 16")
	case t.MaxBytes < minLogBytes:
		return bound.Malformedf("pair.timeline.max_bytes", "must be at least 64 KiB")
	}
	if t.MaxLag == 0 {
		t.MaxLag = t.MaxEvents
	}
	switch t.Delivery {
	case 0:
		t.Delivery = Live
	case Live, AfterRun:
	default:
		return bound.Malformedf("pair.timeline.delivery", "must be Live or AfterRun")
	}
	for _, o := range t.Required {
		if o == nil {
			return bound.Missing("pair.timeline.required[]")
		}
	}
	for _, o := range t.BestEffort {
		if o == nil {
			return bound.Missing("pair.timeline.best_effort[]")
		}
	}
	t.Required = append([]eventlog.Observer(nil), t.Required...)
	t.BestEffort = append([]eventlog.Observer(nil), t.BestEffort...)
	return nil
}

// A timeline is bounded like a run log (kernel/engine's Limits): at least
// minLogEvents events and minLogBytes bytes, with the same reserve for
// terminal events. TestTimelineBoundsAreARunLogs keeps the two in step.
const (
	minLogEvents     = 16
	minLogBytes      = 64 << 10
	logReserveEvents = 8
	logReserveBytes  = 32 << 10
)

// logConfig is the timeline's eventlog configuration. Terminal events (the
// pair terminal and relayed run terminals) get a reserve, as in a run log.
func (t TimelineConfig) logConfig() eventlog.Config {
	return eventlog.Config{
		MaxEvents:     t.MaxEvents,
		MaxBytes:      t.MaxBytes,
		ReserveEvents: logReserveEvents,
		ReserveBytes:  logReserveBytes,
		MaxLag:        t.MaxLag,
		Required:      t.Required,
		BestEffort:    t.BestEffort,
		Mailbox:       t.Mailbox,
	}
}

// timelineCapacity is the room a pair's timeline starts with
// (eventlog.Config.Capacity): for a relay, its own three events and two
// text runs of seven events each, with a little to spare; for a review
// loop, a round more. Longer pairs grow it as needed. An unused slot costs
// its 48 bytes on every pair, so the room is not rounded up further.
func timelineCapacity(p Pattern) int {
	if p == Relay {
		return 18
	}
	return 32
}

// sameSource compares two sources without panicking on a source whose
// dynamic type is not comparable.
func sameSource(a, b plan.Source) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}
