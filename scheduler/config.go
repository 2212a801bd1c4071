package scheduler

import (
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/engine"
)

// Defaults and limits of Config.
const (
	DefaultPairs  = 4
	MaxPairs      = 4096
	MaxModelOps   = 1 << 20
	MaxModelWait  = time.Hour
	DefaultQueue  = 1024
	MaxQueue      = 1 << 24
	DefaultRetain = 1024
	MaxRetain     = 1 << 24
)

// Config configures a Scheduler. New copies it.
type Config struct {
	// Pairs bounds the pairs that run at once: the number of the
	// scheduler's slots. 1..MaxPairs; 0 means DefaultPairs.
	Pairs int
	// ModelOps bounds the model operations in flight across all pairs:
	// 0..MaxModelOps, 0 for no bound other than Pairs (a pair runs at most
	// one model operation at a time). A bound below Pairs lets pairs run
	// tools while others wait for the model.
	ModelOps int
	// ModelWait bounds how long a model operation waits for a slot; past
	// it the operation fails with a retryable *model.ProviderError
	// (CodeModelBusy). 0 means as long as the run's context allows;
	// at most MaxModelWait.
	ModelWait time.Duration
	// Queue bounds the jobs waiting to start: 1..MaxQueue, 0 for
	// DefaultQueue.
	Queue int
	// Retain bounds the finished jobs the scheduler keeps — state,
	// result and pair timeline, about 10 KiB for a small pair. When one
	// more would be kept, the job that finished first is forgotten.
	// 1..MaxRetain, 0 for DefaultRetain.
	Retain int
	// Clock times submissions, starts and ends; nil means the wall clock.
	// Like IDs it may be called with the scheduler's state locked.
	Clock engine.Clock
	// IDs names a job from its submission number (1, 2, ...). It is called
	// with the scheduler's state locked, so it must be quick; it must
	// return an identifier (id.Check) not in use. Nil means
	// "job-<random>-<n>", with one random part per scheduler.
	IDs func(seq uint64) string
}

func (c *Config) normalize() error {
	switch {
	case c.Pairs == 0:
		c.Pairs = DefaultPairs
	case c.Pairs < 0:
		return bound.Malformedf("scheduler.pairs", "must not be negative")
	case c.Pairs > MaxPairs:
		return bound.Count("scheduler.pairs", c.Pairs, MaxPairs)
	}
	switch {
	case c.ModelOps < 0:
		return bound.Malformedf("scheduler.model_ops", "must not be negative")
	case c.ModelOps > MaxModelOps:
		return bound.Count("scheduler.model_ops", c.ModelOps, MaxModelOps)
	}
	if c.ModelWait < 0 || c.ModelWait > MaxModelWait {
		return bound.Malformedf("scheduler.model_wait", "must be between 0 and 1h")
	}
	if c.ModelWait > 0 && c.ModelOps == 0 {
		return bound.Conflicting("scheduler.model_wait", "needs a model_ops bound")
	}
	switch {
	case c.Queue == 0:
		c.Queue = DefaultQueue
	case c.Queue < 0:
		return bound.Malformedf("scheduler.queue", "must not be negative")
	case c.Queue > MaxQueue:
		return bound.Count("scheduler.queue", c.Queue, MaxQueue)
	}
	switch {
	case c.Retain == 0:
		c.Retain = DefaultRetain
	case c.Retain < 0:
		return bound.Malformedf("scheduler.retain", "must not be negative")
	case c.Retain > MaxRetain:
		return bound.Count("scheduler.retain", c.Retain, MaxRetain)
	}
	if c.Clock == nil {
		c.Clock = engine.ClockFunc(time.Now)
	}
	if c.IDs == nil {
		c.IDs = Sequential(randomPrefix())
	}
	return nil
}

// randomPrefix is the prefix of the default IDs, "job-<8 random hex
// digits>-<n>", so that two schedulers, or two lives of one host, do not
// share job IDs.
func randomPrefix() string {
	var b [4]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return "job-" + hex.EncodeToString(b[:]) + "-"
}

// Sequential returns an ID source for tests and examples: prefix followed
// by the submission number ("job-1", "job-2", ...).
func Sequential(prefix string) func(seq uint64) string {
	return func(seq uint64) string {
		var buf [64]byte // on the stack: the string is the one allocation
		return string(strconv.AppendUint(append(buf[:0], prefix...), seq, 10))
	}
}
