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

// Entry is one event of a side log, its payload decoded.
type Entry[P any] struct {
	Kind    string
	Time    time.Time
	Payload P
}

// Read reads the store log name back; none when the store has no such
// log (the pair recorded nothing beside its timeline).
func Read[P any](ctx context.Context, st *store.Store, name string) ([]Entry[P], error) {
	var buf bytes.Buffer
	err := st.ReplayJSON(ctx, &buf, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Entry[P]
	for line := range bytes.Lines(buf.Bytes()) {
		e, err := eventlog.Decode(bytes.TrimSuffix(line, []byte("\n")))
		if err != nil {
			return nil, err
		}
		en := Entry[P]{Kind: e.Kind(), Time: e.Time()}
		if err := json.Unmarshal(e.Payload().AppendJSON(nil), &en.Payload); err != nil {
			return nil, err
		}
		out = append(out, en)
	}
	return out, nil
}
