package bound

import (
	"errors"
	"strconv"
)

// Published bounds (K2). Sizes are in bytes of UTF-8 text unless the name
// says otherwise.
const (
	MaxIDBytes               = 128       // any identifier
	MaxNameBytes             = 64        // tool, model and definition names
	MaxDescriptionBytes      = 4 << 10   // tool descriptions
	MaxSchemaBytes           = 16 << 10  // a tool's JSON schema
	MaxCapabilities          = 16        // capabilities per tool definition
	MaxToolsPerPlan          = 128       // tool definitions in one plan
	MaxSystemPromptBytes     = 64 << 10  // a definition's system prompt
	MaxMessageBytes          = 256 << 10 // all text of one message
	MaxPartsPerMessage       = 64        // parts in one message
	MaxMessagesPerRequest    = 1024      // messages in one model request
	MaxTextDeltaBytes        = 64 << 10  // one streamed text item
	MaxTextPerOperation      = 256 << 10 // all text streamed by one model operation
	MaxToolCallsPerOperation = 32        // tool calls requested by one model operation
	MaxToolArgumentsBytes    = 64 << 10  // one tool call's JSON arguments
	MaxToolResultBytes       = 128 << 10 // one tool result's content
	MaxProblemBytes          = 4 << 10   // a problem's message
	MaxProgressBytes         = 4 << 10   // one progress report
	MaxMetadataBytes         = 4 << 10   // provider metadata JSON
	MaxMetadataDepth         = 8         // nesting of provider metadata JSON
)

// Rule says which kind of check a value failed.
type Rule uint8

const (
	// Required: the field is empty or zero but must be set.
	Required Rule = iota + 1
	// TooLarge: the field is longer than its limit (bytes).
	TooLarge
	// TooMany: the field has more elements than its limit.
	TooMany
	// Malformed: the field has the wrong shape (syntax, enum value, JSON).
	Malformed
	// Conflict: the field contradicts another field of the same value.
	Conflict
)

func (r Rule) String() string {
	switch r {
	case Required:
		return "required"
	case TooLarge:
		return "too large"
	case TooMany:
		return "too many"
	case Malformed:
		return "malformed"
	case Conflict:
		return "conflict"
	}
	return "rule(" + strconv.Itoa(int(r)) + ")"
}

// ErrInvalid matches every *Error with errors.Is, so a caller can branch on
// "bad input" without caring which field.
var ErrInvalid = errors.New("invalid value")

// ErrExceeded matches every *Error whose rule is TooLarge or TooMany.
var ErrExceeded = errors.New("limit exceeded")

// Error is the typed error for a value that fails validation. Field names
// the value path (for example "message.parts[3].text"); Limit and Got are set
// for TooLarge and TooMany. Detail never contains the rejected value itself,
// so a secret passed by mistake cannot leak through an error.
type Error struct {
	Field  string
	Rule   Rule
	Limit  int
	Got    int
	Detail string
}

func (e *Error) Error() string {
	s := e.Field + ": " + e.Rule.String()
	switch e.Rule {
	case TooLarge, TooMany:
		s += " (" + strconv.Itoa(e.Got) + " > limit " + strconv.Itoa(e.Limit) + ")"
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Is reports ErrInvalid for every validation error and ErrExceeded for size
// and count violations.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrInvalid:
		return true
	case ErrExceeded:
		return e.Rule == TooLarge || e.Rule == TooMany
	}
	return false
}

// Bytes returns a TooLarge error when got exceeds limit, else nil.
func Bytes(field string, got, limit int) error {
	if got <= limit {
		return nil
	}
	return &Error{Field: field, Rule: TooLarge, Limit: limit, Got: got}
}

// Count returns a TooMany error when got exceeds limit, else nil.
func Count(field string, got, limit int) error {
	if got <= limit {
		return nil
	}
	return &Error{Field: field, Rule: TooMany, Limit: limit, Got: got}
}

// Missing returns a Required error for field.
func Missing(field string) error {
	return &Error{Field: field, Rule: Required}
}

// Malformedf returns a Malformed error for field with a short reason. The
// reason must describe the problem, not quote the value.
func Malformedf(field, reason string) error {
	return &Error{Field: field, Rule: Malformed, Detail: reason}
}

// Conflicting returns a Conflict error for field with a short reason.
func Conflicting(field, reason string) error {
	return &Error{Field: field, Rule: Conflict, Detail: reason}
}

// Text checks a required text field: non-empty, valid UTF-8 and at most limit
// bytes.
func Text(field, s string, limit int) error {
	if s == "" {
		return Missing(field)
	}
	return OptionalText(field, s, limit)
}

// OptionalText checks an optional text field: valid UTF-8 and at most limit
// bytes.
func OptionalText(field, s string, limit int) error {
	if err := Bytes(field, len(s), limit); err != nil {
		return err
	}
	if !validUTF8(s) {
		return Malformedf(field, "not valid UTF-8")
	}
	return nil
}
