package enginetest

import (
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Text returns a text delta item; it panics on invalid input (test data).
func Text(s string) model.Item { return must(model.TextDelta(s)) }

// Call returns a tool call item; it panics on invalid input (test data).
func Call(callID, name, args string) model.Item {
	return must(model.ToolCall(must(tool.NewCall(id.Call(callID), name, []byte(args)))))
}

// Done returns a completed item with the given token counts.
func Done(in, out int64) model.Item {
	return model.Completed(must(model.NewUsage(in, out)), model.Metadata{})
}

// Fail returns a failed item.
func Fail(code, msg string) model.Item { return must(model.Failed(problem.Must(code, msg))) }

// Answer is a one-operation script entry: text then completed.
func Answer(text string) []model.Item { return []model.Item{Text(text), Done(10, 5)} }
