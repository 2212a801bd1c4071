package orchestrator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/interaction"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Problem codes of the results of calls that approval stopped. They are
// model-visible problems, so the model can change course; the tool never
// ran.
const (
	CodeApprovalDenied  = "approval_denied"  // a person (or script) said no
	CodeApprovalTimeout = "approval_timeout" // no answer within the approval timeout
	CodeApprovalFailed  = "approval_failed"  // the question could not be asked or answered
)

var (
	problemApprovalDenied  = problem.Must(CodeApprovalDenied, "the call was not approved; it did not run")
	problemApprovalTimeout = problem.Must(CodeApprovalTimeout, "no approval came in time; the call did not run")
	problemApprovalFailed  = problem.Must(CodeApprovalFailed, "the approval question could not be asked or answered; the call did not run")
)

// DefaultApprovalTimeout is how long a question waits for its answer when
// ApprovalConfig.Timeout is zero. A question that is not answered in time
// denies its call.
const DefaultApprovalTimeout = 5 * time.Minute

// MaxApprovalTimeout bounds ApprovalConfig.Timeout.
const MaxApprovalTimeout = 24 * time.Hour

// approvalMode is what an ApprovalPolicy asks about.
type approvalMode uint8

const (
	approveNever approvalMode = iota // the zero policy
	approveMutating
	approveAll
	approveNamed
)

// ApprovalPolicy says which tool calls wait for a person's approval before
// they run (R1): none (Never, the zero value), every mutating tool's, every
// call, or the calls of the tools it names. It is an immutable value.
type ApprovalPolicy struct {
	mode  approvalMode
	names []string // sorted, unique; approveNamed only
}

// Approval policies without names.
var (
	ApproveNever    = ApprovalPolicy{}
	ApproveMutating = ApprovalPolicy{mode: approveMutating}
	ApproveAll      = ApprovalPolicy{mode: approveAll}
)

// MaxApprovalNames bounds the tool names of a policy.
const MaxApprovalNames = bound.MaxToolsPerPlan

// ApproveTools returns the policy that asks about the calls of the named
// tools. Names must be tool names (bound.Name); duplicates are refused.
func ApproveTools(names ...string) (ApprovalPolicy, error) {
	if len(names) == 0 {
		return ApprovalPolicy{}, bound.Missing("approval.tools")
	}
	if err := bound.Count("approval.tools", len(names), MaxApprovalNames); err != nil {
		return ApprovalPolicy{}, err
	}
	ns := slices.Clone(names)
	slices.Sort(ns)
	for i, n := range ns {
		if err := bound.Name("approval.tools[]", n); err != nil {
			return ApprovalPolicy{}, err
		}
		if i > 0 && ns[i-1] == n {
			return ApprovalPolicy{}, bound.Malformedf("approval.tools", "names "+n+" twice")
		}
	}
	return ApprovalPolicy{mode: approveNamed, names: ns}, nil
}

// ParseApprovalPolicy reads "never", "mutating", "all", or a
// comma-separated list of tool names ("fs.write,net.fetch").
func ParseApprovalPolicy(s string) (ApprovalPolicy, error) {
	switch s {
	case "never":
		return ApproveNever, nil
	case "mutating":
		return ApproveMutating, nil
	case "all":
		return ApproveAll, nil
	case "":
		return ApprovalPolicy{}, bound.Missing("approval.policy")
	}
	var names []string
	for n := range strings.SplitSeq(s, ",") {
		names = append(names, strings.TrimSpace(n))
	}
	return ApproveTools(names...)
}

// String returns the policy as ParseApprovalPolicy reads it.
func (p ApprovalPolicy) String() string {
	switch p.mode {
	case approveMutating:
		return "mutating"
	case approveAll:
		return "all"
	case approveNamed:
		return strings.Join(p.names, ",")
	}
	return "never"
}

// IsNever reports whether the policy asks about no call.
func (p ApprovalPolicy) IsNever() bool { return p.mode == approveNever }

// Asks reports whether a call of the tool def describes waits for approval.
func (p ApprovalPolicy) Asks(def tool.Definition) bool {
	switch p.mode {
	case approveMutating:
		return def.Effect() == tool.Mutating
	case approveAll:
		return true
	case approveNamed:
		_, ok := slices.BinarySearch(p.names, def.Name())
		return ok
	}
	return false
}

// ApprovalConfig is a pair's approval before side effects (R1).
type ApprovalConfig struct {
	// Policy says which calls wait for approval; the zero policy asks
	// about none.
	Policy ApprovalPolicy
	// Timeout bounds the wait for each answer; no answer in time denies
	// the call with approval_timeout. Zero means DefaultApprovalTimeout;
	// at most MaxApprovalTimeout.
	Timeout time.Duration
}

func (c *ApprovalConfig) normalize() error {
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultApprovalTimeout
	case c.Timeout < 0 || c.Timeout > MaxApprovalTimeout:
		return bound.Malformedf("pair.approval.timeout", "must be between 0 and 24h")
	}
	return nil
}

// ApprovalKind is the "type" of an approval question's prompt.
const ApprovalKind = "spice-orch.approval/v1"

// Approval is one approval question as a broker sees it: which call of
// which worker waits, what the tool is, and the digest that binds the
// answer to exactly this call. It travels as the K28 question's prompt
// (JSON), and the question's only choices are ApprovalAnswer(digest, true)
// and ApprovalAnswer(digest, false): an answer can approve nothing but the
// call it was asked about.
type Approval struct {
	// Question is the interaction's ID; set by ParseApproval, not encoded.
	Question id.Interaction `json:"-"`
	Type     string         `json:"type"`
	Pair     string         `json:"pair"`
	Worker   string         `json:"worker"`
	Run      id.Run         `json:"run"`
	Call     id.Call        `json:"call"`
	Tool     string         `json:"tool"`
	Effect   string         `json:"effect"`
	Replay   string         `json:"replay"`
	// Arguments are the call's canonical arguments, when they fit the
	// question; otherwise ArgumentsPreview holds their start, cut at a
	// character boundary, and ArgumentsBytes their whole length. The
	// digest always covers all of them.
	Arguments        json.RawMessage `json:"arguments,omitempty"`
	ArgumentsPreview string          `json:"arguments_preview,omitempty"`
	ArgumentsBytes   int             `json:"arguments_bytes"`
	// Digest is the hex SHA-256 of the exact call (CallDigest).
	Digest string `json:"digest"`
}

// CallDigest returns the hex SHA-256 that an approval is bound to: a
// domain, the tool name, the canonical arguments, the call ID and the run
// ID, each length-prefixed. Any change to any of them changes the digest.
func CallDigest(runID id.Run, call tool.Call) string {
	return callDigest(runID, call, canonicalArguments(call.Arguments()))
}

const digestDomain = "spice-orch/orchestrator.Approval/v1"

func callDigest(runID id.Run, call tool.Call, args []byte) string {
	h := sha256.New()
	var n [8]byte
	for _, s := range [...][]byte{[]byte(digestDomain), []byte(call.Name()), args, []byte(call.ID()), []byte(runID)} {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write(s)
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0]))
}

// canonicalArguments re-encodes a JSON object with sorted keys, no
// insignificant space and numbers as written, so that two spellings of one
// value have one digest. Arguments the kernel accepted are valid JSON; the
// fallback only keeps the function total.
func canonicalArguments(raw []byte) []byte {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return raw
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// ApprovalAnswer returns the answer text that approves (or denies) the call
// whose digest is digest: "approve:<digest>" or "deny:<digest>".
func ApprovalAnswer(digest string, approve bool) string {
	if approve {
		return "approve:" + digest
	}
	return "deny:" + digest
}

// ErrNotApproval is returned by ParseApproval for a question that is not an
// approval question.
var ErrNotApproval = errors.New("orchestrator: not an approval question")

// ParseApproval reads an approval question. It refuses (ErrNotApproval,
// or a *bound.Error for a malformed one) a question whose prompt is not an
// approval of this version or whose choices are not exactly the two
// answers bound to its digest.
func ParseApproval(q interaction.Question) (Approval, error) {
	a, err := parseApprovalPrompt(q.Prompt())
	if err != nil {
		return Approval{}, err
	}
	want := []string{ApprovalAnswer(a.Digest, true), ApprovalAnswer(a.Digest, false)}
	if !slices.Equal(slices.Collect(q.Choices()), want) {
		return Approval{}, bound.Malformedf("approval.choices", "must be the two answers bound to the digest")
	}
	a.Question = q.ID()
	return a, nil
}

// parseApprovalPrompt reads an approval question's prompt, as a question
// and as its recorded interaction.started carry it.
func parseApprovalPrompt(prompt string) (Approval, error) {
	if len(prompt) > interaction.MaxPromptBytes || !isApprovalPrompt(prompt) {
		return Approval{}, ErrNotApproval
	}
	d := json.NewDecoder(strings.NewReader(prompt))
	d.DisallowUnknownFields()
	var a Approval
	if err := d.Decode(&a); err != nil || d.More() {
		return Approval{}, bound.Malformedf("approval", "not a valid approval question")
	}
	if _, err := d.Token(); err == nil {
		return Approval{}, bound.Malformedf("approval", "trailing data")
	}
	if len(a.Digest) != 2*sha256.Size {
		return Approval{}, bound.Malformedf("approval.digest", "must be a hex SHA-256")
	}
	if _, err := hex.DecodeString(a.Digest); err != nil || strings.ToLower(a.Digest) != a.Digest {
		return Approval{}, bound.Malformedf("approval.digest", "must be a hex SHA-256")
	}
	return a, nil
}

// approvalQuestion builds the prompt and choices for call.
func approvalQuestion(pairID, worker string, runID id.Run, def tool.Definition, call tool.Call) (string, []string) {
	args := canonicalArguments(call.Arguments())
	a := Approval{
		Type: ApprovalKind, Pair: pairID, Worker: worker, Run: runID, Call: call.ID(), Tool: call.Name(),
		Effect: def.Effect().String(), Replay: def.Replay().String(),
		Arguments: args, ArgumentsBytes: len(args), Digest: callDigest(runID, call, args),
	}
	prompt, err := json.Marshal(a)
	if err != nil || len(prompt) > interaction.MaxPromptBytes {
		// Show the start of the arguments; the digest still covers all.
		// 1 KiB, even if JSON escapes each byte as six, leaves the prompt
		// under its bound beside the other fields' bounded IDs and names.
		a.Arguments = nil
		a.ArgumentsPreview = cutUTF8(string(args), 1024)
		prompt, _ = json.Marshal(a)
	}
	return string(prompt), []string{ApprovalAnswer(a.Digest, true), ApprovalAnswer(a.Digest, false)}
}

// cutUTF8 returns at most n bytes of s, cut at a character boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// approvalGuard is the dispatch guard (K10) that asks before a call runs.
// It reads who is calling from the scope the pair's dispatcher put on the
// call's context, and asks through the engine's reporter, so the question
// and its end are interaction events of the run, relayed into the pair
// timeline like every run event.
type approvalGuard struct {
	cfg ApprovalConfig
}

var _ tool.Guard = approvalGuard{}

func (g approvalGuard) Before(ctx context.Context, def tool.Definition, call tool.Call) tool.Decision {
	if !g.cfg.Policy.Asks(def) {
		return tool.Allow()
	}
	sc, ok := ctx.Value(scopeKey{}).(*callScope)
	if !ok || sc.asker == nil {
		return tool.Deny(problemApprovalFailed)
	}
	prompt, choices := approvalQuestion(sc.pairID, sc.worker, sc.runID, def, call)
	actx, cancel := context.WithTimeout(ctx, g.cfg.Timeout)
	defer cancel()
	ans, err := sc.asker.Ask(actx, prompt, choices...)
	switch {
	case err == nil && ans == choices[0]:
		return tool.Allow()
	case err == nil:
		// The kernel checked the answer against the choices: anything
		// else is the denial of this very call.
		return tool.Deny(problemApprovalDenied)
	case actx.Err() != nil && ctx.Err() == nil:
		// Our deadline, not the run's end.
		return tool.Deny(problemApprovalTimeout)
	}
	return tool.Deny(problemApprovalFailed)
}

func (approvalGuard) After(context.Context, tool.Definition, tool.Call, tool.Observation) {}
