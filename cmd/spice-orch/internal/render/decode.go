package render

import (
	"time"

	"github.com/spice-orch/spice-orch/kernel/event"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
)

// entry is one decoded timeline event.
type entry struct {
	seq     uint64
	kind    string
	time    time.Time
	payload eventlog.Payload // orchestrator.DecodePayload's
}

// run returns a relayed event's kernel payload, nil for a kind this build
// does not know.
func (en entry) run() event.Payload {
	r, _ := en.payload.(orchestrator.Relayed)
	p, _ := r.Payload().(event.Payload)
	return p
}

// decode reads one canonical event line (without its newline).
func decode(line []byte) (entry, error) {
	ev, err := eventlog.Decode(line)
	if err != nil {
		return entry{}, err
	}
	raw, _ := ev.Payload().(eventlog.Raw)
	p, err := orchestrator.DecodePayload(ev.Kind(), raw.Bytes())
	if err != nil {
		return entry{}, err
	}
	return entry{seq: ev.Seq(), kind: ev.Kind(), time: ev.Time(), payload: p}, nil
}
