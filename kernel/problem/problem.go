package problem

import "github.com/spice-orch/spice-orch/kernel/bound"

// Problem is an immutable code and message. The zero value means "no
// problem".
type Problem struct {
	code    string
	message string
}

// New validates and returns a Problem. The code must be a bound.Name
// ("invalid_arguments", "rate_limited"); the message is bounded by
// bound.MaxProblemBytes and may be empty.
func New(code, message string) (Problem, error) {
	if err := bound.Name("problem.code", code); err != nil {
		return Problem{}, err
	}
	if err := bound.OptionalText("problem.message", message, bound.MaxProblemBytes); err != nil {
		return Problem{}, err
	}
	return Problem{code: code, message: message}, nil
}

// Must is New for constant problems known to be valid; it panics otherwise.
// Use it only with literals.
func Must(code, message string) Problem {
	p, err := New(code, message)
	if err != nil {
		panic(err)
	}
	return p
}

// Code returns the machine-readable code.
func (p Problem) Code() string { return p.code }

// Message returns the human-readable message.
func (p Problem) Message() string { return p.message }

// IsZero reports whether p is the zero Problem.
func (p Problem) IsZero() bool { return p.code == "" }

// String returns "code: message".
func (p Problem) String() string {
	if p.message == "" {
		return p.code
	}
	return p.code + ": " + p.message
}
