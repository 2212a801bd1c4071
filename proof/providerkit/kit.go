package providerkit

import (
	"encoding/json"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spice-orch/spice-orch/kernel/message"
	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// DefaultToolName is the one tool DefaultRequest offers.
const DefaultToolName = "lookup"

// Defaults of Config.
const (
	DefaultPrompt = 5 * time.Second
	DefaultWait   = 30 * time.Second
)

// Setup returns a provider primed for one scenario. It may register
// cleanups on t (a test server to close); the kit calls it once per
// scenario, before it takes its goroutine snapshot.
type Setup func(t *testing.T) model.Provider

// Config says how to prime the provider under test. Text, ToolCall and
// Slow are required; the others are optional and their scenarios are
// skipped (visibly, with t.Skip) when nil.
type Config struct {
	// Text answers Request with text only, then Completed.
	Text Setup
	// ToolCall answers Request with at least one tool call, then
	// Completed.
	ToolCall Setup
	// Slow answers Request with at least one non-terminal item and then
	// produces nothing more until the context is cancelled. A provider
	// that checks its context before every item also qualifies.
	Slow Setup
	// ErrorBeforeStream makes Stream fail before any stream exists.
	ErrorBeforeStream Setup
	// Oversized streams more than a kernel bound allows (for example more
	// text than bound.MaxTextPerOperation).
	Oversized Setup

	// Request is sent in every scenario; the zero Request means
	// DefaultRequest().
	Request model.Request
	// Prompt bounds every call made after a cancellation. Zero means
	// DefaultPrompt.
	Prompt time.Duration
	// Wait bounds every other call, so a hanging provider fails rather
	// than stalls the test. Zero means DefaultWait.
	Wait time.Duration
	// GoroutineOptions are passed to goleak when the kit checks that no
	// goroutine outlived a cancelled or abandoned stream, for providers
	// with long-lived background goroutines of their own.
	GoroutineOptions []goleak.Option
}

// DefaultRequest is a user message and one read-only tool, DefaultToolName,
// whose arguments are {"query": string}.
func DefaultRequest() model.Request {
	def, err := tool.NewDefinition(tool.DefinitionConfig{
		Name:        DefaultToolName,
		Description: "Looks a word up.",
		Schema:      json.RawMessage(`{"type":"object","properties":{"query":{"type":"string"}},"required":["query"]}`),
		Effect:      tool.ReadOnly,
		Replay:      tool.Safe,
	})
	if err != nil {
		panic(err) // constant input
	}
	msg, err := message.User("Say hello, or look up the word 'hello'.")
	if err != nil {
		panic(err)
	}
	req, err := model.NewRequest(model.RequestConfig{
		Operation: "op-kit-1",
		Model:     "conformance-model",
		System:    "You are the subject of a conformance test.",
		Messages:  []message.Message{msg},
		Tools:     []tool.Definition{def},
	})
	if err != nil {
		panic(err)
	}
	return req
}

// options is a Config with defaults applied.
type options struct {
	req    model.Request
	prompt time.Duration
	wait   time.Duration
	leak   []goleak.Option
}

func (c Config) options() options {
	o := options{req: c.Request, prompt: c.Prompt, wait: c.Wait, leak: c.GoroutineOptions}
	if o.req.IsZero() {
		o.req = DefaultRequest()
	}
	if o.prompt <= 0 {
		o.prompt = DefaultPrompt
	}
	if o.wait <= 0 {
		o.wait = DefaultWait
	}
	return o
}

// Run checks the provider contract, one subtest per scenario.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	o := cfg.options()
	for _, s := range []struct {
		name     string
		setup    Setup
		required bool
		check    func(model.Provider, options) error
	}{
		{"text", cfg.Text, true, checkText},
		{"tool_call", cfg.ToolCall, true, checkToolCall},
		{"cancel_mid_stream", cfg.Slow, true, checkCancelMidStream},
		{"cancel_before_stream", cfg.Slow, true, checkCancelBeforeStream},
		{"close_without_recv", cfg.Slow, true, checkCloseWithoutRecv},
		{"error_before_stream", cfg.ErrorBeforeStream, false, checkErrorBeforeStream},
		{"oversized", cfg.Oversized, false, checkOversized},
	} {
		t.Run(s.name, func(t *testing.T) {
			if s.setup == nil {
				if s.required {
					t.Fatalf("providerkit: Config has no setup for the %s scenario", s.name)
				}
				t.Skipf("providerkit: Config has no setup for the %s scenario", s.name)
			}
			p := s.setup(t)
			if p == nil {
				t.Fatalf("providerkit: the %s setup returned no provider", s.name)
			}
			if err := s.check(p, o); err != nil {
				t.Fatal(err)
			}
		})
	}
}
