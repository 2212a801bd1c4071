package providerkit

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/model"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

func conformingConfig() Config {
	return Config{
		Text: func(*testing.T) model.Provider {
			return &fake{items: []model.Item{textItem("hel"), textItem("lo"), doneItem()}}
		},
		ToolCall: func(*testing.T) model.Provider { return &fake{items: []model.Item{callItem("c1"), doneItem()}} },
		Slow:     func(*testing.T) model.Provider { return &fake{items: []model.Item{textItem("thinking")}, stall: true} },
		ErrorBeforeStream: func(*testing.T) model.Provider {
			return &fake{err: must(model.NewProviderError(model.ProviderErrorConfig{
				Problem: problem.Must("rate_limited", "slow down"), Retryable: true, RetryAfter: time.Second}))}
		},
		Oversized: func(*testing.T) model.Provider { return &fake{items: []model.Item{textItem("partial"), failedItem()}} },
	}
}

func TestRunAgainstAConformingFake(t *testing.T) {
	Run(t, conformingConfig())
}

// fast keeps the kit's timeouts short for providers that are meant to
// fail them.
func fast() options {
	o := Config{Prompt: 100 * time.Millisecond, Wait: time.Second}.options()
	return o
}

func requireViolation(t *testing.T, err error, want string) {
	t.Helper()
	require.Error(t, err, "the kit must catch this provider")
	require.Contains(t, err.Error(), want)
}

// The kit's own contract: each check fails for a provider that breaks the
// rule it names.

func TestKitCatchesZeroItem(t *testing.T) {
	requireViolation(t, checkText(&fake{items: []model.Item{{}}}, fast()), "zero item")
}

func TestKitCatchesMissingTerminal(t *testing.T) {
	requireViolation(t, checkText(&fake{items: []model.Item{textItem("a")}}, fast()),
		"stream ended without a completed or failed item")
}

func TestKitCatchesSecondTerminal(t *testing.T) {
	requireViolation(t, checkText(&fake{items: []model.Item{textItem("a"), doneItem(), doneItem()}}, fast()),
		"item after the terminal")
}

func TestKitCatchesOversizedItems(t *testing.T) {
	items := make([]model.Item, 0, 40)
	for i := range 33 {
		items = append(items, callItem("c"+strings.Repeat("x", i)))
	}
	requireViolation(t, checkToolCall(&fake{items: append(items, doneItem())}, fast()), "stream.tool_calls: too many")
}

func TestKitCatchesEOFNotRepeated(t *testing.T) {
	f := &fake{items: []model.Item{textItem("a"), doneItem()}, afterEOF: func() error { return errors.New("gone") }}
	requireViolation(t, checkText(f, fast()), "want io.EOF again")
}

func TestKitCatchesCloseErrorAfterEOF(t *testing.T) {
	f := &fake{items: []model.Item{textItem("a"), doneItem()}, onClose: func() error { return errors.New("boom") }}
	requireViolation(t, checkText(f, fast()), "Close after io.EOF returned boom")
}

func TestKitCatchesWrongScenarioShape(t *testing.T) {
	requireViolation(t, checkText(&fake{items: []model.Item{callItem("c1"), doneItem()}}, fast()), "want text only")
	requireViolation(t, checkToolCall(&fake{items: []model.Item{textItem("a"), doneItem()}}, fast()), "without a tool call")
	requireViolation(t, checkText(&fake{items: []model.Item{textItem("a"), failedItem()}}, fast()), "want Completed")
}

func TestKitCatchesIgnoredCancellation(t *testing.T) {
	r := newRelease()
	t.Cleanup(r.close)
	f := &fake{items: []model.Item{textItem("a")}, stall: true, deaf: true, onStall: func(context.Context) error {
		<-r.ch // deaf to the context
		return io.ErrUnexpectedEOF
	}}
	requireViolation(t, checkCancelMidStream(f, fast()), "Recv after cancellation did not return within")
}

func TestKitCatchesNonContextErrorAfterCancel(t *testing.T) {
	f := &fake{items: []model.Item{textItem("a")}, stall: true,
		afterCancel: func() (model.Item, error, bool) { return model.Item{}, errors.New("stopped"), true }}
	requireViolation(t, checkCancelMidStream(f, fast()), "not the context's error")
}

func TestKitCatchesCompletionAfterCancel(t *testing.T) {
	f := &fake{items: []model.Item{textItem("a")}, stall: true,
		afterCancel: func() (model.Item, error, bool) { return doneItem(), nil, true }}
	requireViolation(t, checkCancelMidStream(f, fast()), "completed after cancellation")
}

func TestKitAcceptsFailedItemAfterCancel(t *testing.T) {
	n := 0
	f := &fake{items: []model.Item{textItem("a")}, stall: true, afterCancel: func() (model.Item, error, bool) {
		n++
		if n == 1 {
			return failedItem(), nil, true
		}
		return model.Item{}, io.EOF, true
	}}
	require.NoError(t, checkCancelMidStream(f, fast()))
}

func TestKitCatchesLeakedGoroutine(t *testing.T) {
	r := newRelease()
	t.Cleanup(r.close)
	f := &fake{items: []model.Item{textItem("a")}, stall: true,
		onStream: func(context.Context) { go func() { <-r.ch }() }} // outlives Close and cancellation
	requireViolation(t, checkCancelMidStream(f, fast()), "a goroutine outlived the cancelled stream")
	requireViolation(t, checkCloseWithoutRecv(f, fast()), "a goroutine outlived the closed stream")
}

func TestKitCatchesUntypedCancellationError(t *testing.T) {
	f := &fake{err: errors.New("cancelled")}
	requireViolation(t, checkCancelBeforeStream(f, fast()), "want *model.ProviderError")
	pe := must(model.NewProviderError(model.ProviderErrorConfig{Problem: problem.Must("cancelled", "")}))
	requireViolation(t, checkCancelBeforeStream(&fake{err: pe}, fast()), "does not unwrap to context.Canceled")
}

func TestKitCatchesUntypedErrorBeforeStream(t *testing.T) {
	requireViolation(t, checkErrorBeforeStream(&fake{err: errors.New("HTTP 500")}, fast()), "want *model.ProviderError")
	requireViolation(t, checkErrorBeforeStream(&fake{err: &model.ProviderError{}}, fast()), "has no problem")
	pe := must(model.NewProviderError(model.ProviderErrorConfig{Problem: problem.Must("x", "")}))
	requireViolation(t, checkErrorBeforeStream(&fake{err: pe, streamAlso: true}, fast()), "a stream and an error")
	requireViolation(t, checkErrorBeforeStream(&fake{items: []model.Item{textItem("a"), doneItem()}}, fast()), "Stream succeeded")
}

func TestKitCatchesTruncation(t *testing.T) {
	// A provider that cut its content to fit and completed.
	requireViolation(t, checkOversized(&fake{items: []model.Item{textItem("cut"), doneItem()}}, fast()), "never be truncated")
}

func TestKitContainsPanics(t *testing.T) {
	f := &fake{onStream: func(context.Context) { panic("provider bug") }}
	requireViolation(t, checkText(f, fast()), "Stream panicked: provider bug")
}

// TestRunFailsWithoutRequiredSetups runs Run with an empty Config in a
// child process of this test binary: a kit that passes by checking
// nothing would be worse than none.
func TestRunFailsWithoutRequiredSetups(t *testing.T) {
	if os.Getenv("PROVIDERKIT_EMPTY_CONFIG") == "1" {
		Run(t, Config{})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunFailsWithoutRequiredSetups$", "-test.v")
	cmd.Env = append(os.Environ(), "PROVIDERKIT_EMPTY_CONFIG=1")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "the run must fail: %v\n%s", err, out)
	for _, name := range []string{"text", "tool_call", "cancel_mid_stream"} {
		require.Contains(t, string(out), "Config has no setup for the "+name+" scenario")
	}
	require.Contains(t, string(out), "--- SKIP: TestRunFailsWithoutRequiredSetups/error_before_stream")
	o := Config{}.options()
	require.Equal(t, DefaultPrompt, o.prompt)
	require.Equal(t, DefaultWait, o.wait)
	require.False(t, o.req.IsZero(), "the default request is used")
}
