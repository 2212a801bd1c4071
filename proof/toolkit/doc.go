// Package toolkit owns a conformance kit for compiled tools: a function a
// tool's author calls from a test to check a tool.Tool against the
// kernel's tool contracts, K4 to K10.
//
//	func TestConformance(t *testing.T) {
//		toolkit.Run(t, toolkit.Config{
//			New:     func(t *testing.T) tool.Tool { return newMyTool(t.TempDir()) },
//			Valid:   json.RawMessage(`{"path":"a.txt"}`),
//			Invalid: json.RawMessage(`{"path":"/etc/passwd"}`),
//		})
//	}
//
// What it checks:
//   - K4, K5: the definition is one tool.NewDefinition accepts again field
//     for field (effect, replay safety and capabilities agree), with the
//     same fingerprint every time Definition is called and capabilities in
//     canonical order;
//   - K6: the tool goes behind the canonical dispatcher, which serves its
//     definition and refuses other names;
//   - K7: every outcome is a valid result correlated with the call, or a
//     zero result and exactly one direct *tool.ExecutionError with the
//     call's ID and retry advice its replay safety allows; the dispatcher
//     finds no protocol violation; Valid gives a result without a problem,
//     Invalid a model-visible problem; concurrent calls stay valid (run it
//     under -race);
//   - K8: a call whose context is already cancelled, or is cancelled while
//     it runs (Slow), returns within Config.Prompt with a result or an
//     execution error that errors.Is context.Canceled;
//   - K9: a failing reporter changes nothing about the outcome's validity,
//     and nothing reports, nor any goroutine of the tool runs, after
//     Execute has returned;
//   - K10: a guard's denial keeps the tool from running, and an observing
//     guard sees exactly the outcome the caller gets.
//
// This package must not depend on any provider, tool or store: it knows
// tools only through kernel/tool.
package toolkit
