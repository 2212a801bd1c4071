package observerkit

import (
	"context"
	"testing"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// Recorded returns what the observer recorded for log: each event's
// canonical JSON (eventlog.Event.AppendJSON), in sequence order.
type Recorded func(ctx context.Context, log string) ([][]byte, error)

// Defaults of Config.
const (
	DefaultPrompt = 5 * time.Second
	DefaultWait   = 30 * time.Second
	// Events is how many events the ordering scenarios append per log.
	Events = 24
)

// Config says how to build the observer under test in each state.
type Config struct {
	// New returns a fresh observer and a reader of what it recorded; it
	// may register cleanups on t. Required.
	New func(t *testing.T) (eventlog.Observer, Recorded)
	// Blocked returns an observer that cannot complete an Observe until
	// release is called (its storage is locked by someone else), and a
	// reader of what it recorded. Required.
	Blocked func(t *testing.T) (o eventlog.Observer, r Recorded, release func())
	// Refusing returns an observer whose storage refuses every write.
	// Required.
	Refusing func(t *testing.T) eventlog.Observer
	// Prompt bounds a call after its context ended or its deadline
	// passed; Wait every other call.
	Prompt, Wait time.Duration
}

type options struct{ prompt, wait time.Duration }

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

// Run checks the observer contracts, one subtest per scenario.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil || cfg.Blocked == nil || cfg.Refusing == nil {
		t.Fatal("observerkit: Config.New, Config.Blocked and Config.Refusing are required")
	}
	o := cfg.options()
	t.Run("K16_ordering", func(t *testing.T) {
		obs, rec := cfg.New(t)
		if err := checkOrdering(obs, rec, o); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("K16_two_logs_at_once", func(t *testing.T) {
		obs, rec := cfg.New(t)
		if err := checkTwoLogs(obs, rec, o); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("K17_backpressure_and_context", func(t *testing.T) {
		obs, rec, release := cfg.Blocked(t)
		if err := checkBackpressure(obs, rec, release, o); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("K26_finalization_deadline", func(t *testing.T) {
		obs, _, release := cfg.Blocked(t)
		defer release()
		if err := checkDeadline(obs, o); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("K26_refused_writes", func(t *testing.T) {
		if err := checkRefusing(cfg.Refusing(t), o); err != nil {
			t.Fatal(err)
		}
	})
}
