package telemetry

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// MaxReplayEvents bounds the events one ReplayJSON reads.
const MaxReplayEvents = 1 << 20

// ErrMalformed is the cause of every error of a timeline that cannot be
// read (errors.Is); *ReplayError says which line.
var ErrMalformed = errors.New("telemetry: malformed timeline")

// ReplayError reports a line of a recorded timeline that could not be
// read. It never quotes the input.
type ReplayError struct {
	Line int   // 1-based
	Err  error // a *bound.Error, or ErrMalformed
}

func (e *ReplayError) Error() string {
	return "telemetry: timeline line " + strconv.Itoa(e.Line) + ": " + e.Err.Error()
}

func (e *ReplayError) Unwrap() error { return e.Err }

// Is makes every ReplayError match ErrMalformed.
func (e *ReplayError) Is(target error) bool { return target == ErrMalformed }

// ReplayJSON draws a recorded pair timeline — JSON lines as `spice-orch
// run --json` printed them and store.Store.ReplayJSON writes them — as the
// trace the pair drew live: the same spans, times, attributes and, with
// IDGenerator, IDs. It records no metrics (they were recorded live). A
// timeline without its terminal (an interrupted pair) ends its open spans
// at its last event, as interrupted.
//
// Every line is checked as the kernel checks an encoded event (at most
// eventlog.MaxEventBytes, canonical) before anything is drawn from it; a
// bad line stops the replay with a *ReplayError and ends what was drawn.
// Lines must come from one pair, starting with its pair.started. ctx only
// stops the reading.
func (t *Telemetry) ReplayJSON(ctx context.Context, r io.Reader) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), eventlog.MaxEventBytes+1)
	key := ""
	defer func() {
		if key != "" {
			t.finish(key)
		}
	}()
	line := 0
	for sc.Scan() {
		line++
		if err := ctx.Err(); err != nil {
			return err
		}
		if line > MaxReplayEvents {
			return &ReplayError{Line: line, Err: bound.Count("timeline.events", line, MaxReplayEvents)}
		}
		b := bytes.TrimSuffix(sc.Bytes(), []byte{'\r'})
		if len(b) == 0 {
			continue
		}
		e, err := eventlog.Decode(b)
		if err != nil {
			return &ReplayError{Line: line, Err: err}
		}
		raw, _ := e.Payload().(eventlog.Raw)
		p, err := orchestrator.DecodePayload(e.Kind(), raw.Bytes())
		if err != nil {
			return &ReplayError{Line: line, Err: err}
		}
		st, ok := stepOf(e, p)
		if !ok {
			return &ReplayError{Line: line, Err: bound.Malformedf("event.kind", "not a pair or run event kind")}
		}
		switch {
		case key == "" && st.class != stepStart:
			return &ReplayError{Line: line, Err: errors.New("the timeline does not start with pair.started")}
		case key != "" && st.class == stepStart:
			return &ReplayError{Line: line, Err: errors.New("a second pair.started")}
		case key == "" && id.Check("pair_id", st.start.pairID) != nil:
			return &ReplayError{Line: line, Err: id.Check("pair_id", st.start.pairID)}
		case key == "":
			// A replay is named apart from live pairs, so it can run
			// while the pair it replays is drawn live.
			key = "replay\x00" + st.start.pairID + "\x00" + strconv.FormatUint(t.replays.Add(1), 10)
		}
		t.draw(key, st, false)
		if st.class == stepEnd {
			key = "" // drawn to the end
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return &ReplayError{Line: line + 1, Err: bound.Bytes("timeline.line", eventlog.MaxEventBytes+1, eventlog.MaxEventBytes)}
		}
		return err
	}
	return nil
}
