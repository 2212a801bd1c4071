// Package providerkit owns a conformance kit for model providers: a
// function a provider's author calls from a test to check the kernel's
// provider contract (K23 and the model.Provider and model.Stream
// documentation) against their implementation.
//
//	func TestConformance(t *testing.T) {
//		providerkit.Run(t, providerkit.Config{
//			Text:     func(t *testing.T) model.Provider { return primed(t, "hello") },
//			ToolCall: func(t *testing.T) model.Provider { return primed(t, callLookup) },
//			Slow:     func(t *testing.T) model.Provider { return primedToStall(t) },
//		})
//	}
//
// The kit cannot make an arbitrary provider produce a tool call or stall,
// so the Config supplies one setup per scenario: a function returning a
// provider primed to answer Config.Request in that way (a test server
// replaying a transcript, a script, a fake model).
//
// What it checks, scenario by scenario:
//   - every stream is a valid tagged union: no zero or unknown item, items
//     within their bounds (a model.Assembler accepts every one), exactly
//     one terminal item, then io.EOF, and io.EOF again;
//   - Close after io.EOF returns nil, and a second Close is harmless;
//   - after the context is cancelled, mid-stream or before Stream, every
//     call returns within Config.Prompt, the stream never completes, an
//     error is the context's (errors.Is) or a *model.ProviderError, and no
//     goroutine the provider started outlives Close;
//   - closing a stream without reading it releases it the same way;
//   - a failure before the stream is a *model.ProviderError and no stream;
//   - a stream past a kernel bound ends with a Failed item or an error,
//     never a Completed item after truncated content.
//
// This package must not depend on any provider, tool or store: it knows
// providers only through kernel/model.
package providerkit
