package toolkit

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Defaults of Config.
const (
	DefaultPrompt = 5 * time.Second
	DefaultWait   = 30 * time.Second
	// Concurrent is how many calls the concurrency scenario runs at once.
	Concurrent = 8
)

// Config says how to build and call the tool under test.
type Config struct {
	// New returns a fresh tool for one scenario; it may register cleanups
	// on t. Required.
	New func(t *testing.T) tool.Tool
	// Valid are arguments the tool answers with a result without a
	// problem. Required.
	Valid json.RawMessage
	// Invalid are arguments the tool answers with a model-visible problem.
	// Optional: without them the scenario is skipped.
	Invalid json.RawMessage
	// Slow are arguments of a call that runs until its context ends.
	// Optional.
	Slow json.RawMessage
	// Prompt bounds a call after its cancellation; Wait every other call.
	Prompt, Wait time.Duration
}

type options struct {
	prompt, wait time.Duration
}

func (c Config) options() options {
	o := options{prompt: c.Prompt, wait: c.Wait}
	if o.prompt <= 0 {
		o.prompt = DefaultPrompt
	}
	if o.wait <= 0 {
		o.wait = DefaultWait
	}
	return o
}

// Run checks the tool contracts, one subtest per scenario.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil || len(cfg.Valid) == 0 {
		t.Fatal("toolkit: Config.New and Config.Valid are required")
	}
	o := cfg.options()
	for _, s := range []struct {
		name  string
		args  json.RawMessage
		check func(tool.Tool, json.RawMessage, options) error
	}{
		{"K4_K5_definition", cfg.Valid, checkDefinition},
		{"K6_dispatcher", cfg.Valid, checkDispatcher},
		{"K7_valid_call", cfg.Valid, checkValid},
		{"K7_invalid_call", cfg.Invalid, checkInvalid},
		{"K7_concurrent_calls", cfg.Valid, checkConcurrent},
		{"K8_cancelled_before", cfg.Valid, checkCancelledBefore},
		{"K8_cancelled_while_running", cfg.Slow, checkCancelledWhileRunning},
		{"K9_reporter", cfg.Valid, checkReporter},
		{"K10_guards", cfg.Valid, checkGuards},
	} {
		t.Run(s.name, func(t *testing.T) {
			if len(s.args) == 0 {
				t.Skipf("toolkit: Config has no arguments for the %s scenario", s.name)
			}
			tl := cfg.New(t)
			if tl == nil {
				t.Fatal("toolkit: Config.New returned no tool")
			}
			if err := s.check(tl, s.args, o); err != nil {
				t.Fatal(err)
			}
		})
	}
}
