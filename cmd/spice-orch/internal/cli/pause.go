package cli

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
)

// EnvPauseAfter is the test hook described in the package documentation.
const EnvPauseAfter = "SPICE_ORCH_PAUSE_AFTER"

// pauseLimit bounds the hold, so that a test that never sends its signal
// still ends.
const pauseLimit = time.Minute

// pauser is a required timeline observer that, once, holds the pair after
// the first event of its kind until release is closed or pauseLimit
// passes. It is the last timeline observer, so when it says on stderr
// that it holds, every observer before it (the store) has accepted the
// event. It ignores the observer context's deadline on purpose: holding
// past it is the point. It always accepts the event.
type pauser struct {
	kind    string
	release <-chan struct{}
	stderr  io.Writer
	done    atomic.Bool
}

func newPauser(kind string, release <-chan struct{}, stderr io.Writer) (*pauser, error) {
	if err := bound.Name(EnvPauseAfter, kind); err != nil {
		return nil, err
	}
	return &pauser{kind: kind, release: release, stderr: stderr}, nil
}

func (p *pauser) Observe(_ context.Context, e eventlog.Event) error {
	if e.Kind() != p.kind || !p.done.CompareAndSwap(false, true) {
		return nil
	}
	fmt.Fprintf(p.stderr, "spice-orch: %s: holding the pair after event %d (%s) until SIGINT or SIGTERM\n",
		EnvPauseAfter, e.Seq(), e.Kind())
	t := time.NewTimer(pauseLimit)
	defer t.Stop()
	select {
	case <-p.release:
	case <-t.C:
	}
	return nil
}
