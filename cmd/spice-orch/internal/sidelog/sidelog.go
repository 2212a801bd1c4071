package sidelog

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/store"
)

// Read reads the store log name back, each event made by as from its
// kind, time and payload decoded as P; none when the store has no such
// log (the pair recorded nothing beside its timeline).
func Read[P, E any](ctx context.Context, st *store.Store, name string, as func(kind string, at time.Time, payload P) E) ([]E, error) {
	var buf bytes.Buffer
	err := st.ReplayJSON(ctx, &buf, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []E
	for line := range bytes.Lines(buf.Bytes()) {
		e, err := eventlog.Decode(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			return nil, err
		}
		var p P
		if err := json.Unmarshal(e.Payload().AppendJSON(nil), &p); err != nil {
			return nil, err
		}
		out = append(out, as(e.Kind(), e.Time(), p))
	}
	return out, nil
}
