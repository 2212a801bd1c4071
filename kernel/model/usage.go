package model

import (
	"math"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Usage counts the tokens one model operation consumed. It is a small
// value: copy it freely.
type Usage struct {
	input  int64
	output int64
}

// NewUsage returns the usage of one operation. Counts must not be negative;
// zero means the provider did not report them.
func NewUsage(input, output int64) (Usage, error) {
	if input < 0 {
		return Usage{}, bound.Malformedf("usage.input_tokens", "must not be negative")
	}
	if output < 0 {
		return Usage{}, bound.Malformedf("usage.output_tokens", "must not be negative")
	}
	return Usage{input: input, output: output}, nil
}

// Input returns the prompt tokens.
func (u Usage) Input() int64 { return u.input }

// Output returns the generated tokens.
func (u Usage) Output() int64 { return u.output }

// Total returns input plus output, saturating at math.MaxInt64.
func (u Usage) Total() int64 { return addSat(u.input, u.output) }

// Add returns the sum of u and v. Counts saturate at math.MaxInt64 rather
// than wrap, so a budget check on a sum can never be fooled by overflow.
func (u Usage) Add(v Usage) Usage {
	return Usage{input: addSat(u.input, v.input), output: addSat(u.output, v.output)}
}

// IsZero reports whether nothing was counted.
func (u Usage) IsZero() bool { return u == Usage{} }

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}
