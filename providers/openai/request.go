package openai

import (
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/model"
)

// names maps the wire names of renamed tools back to kernel names. Only
// names that contain '.' are renamed, so the table is usually empty.
type names []rename

type rename struct{ wire, kernel string }

// wireName is the name the API sees: OpenAI allows [a-zA-Z0-9_-] only.
func wireName(name string) string {
	if strings.IndexByte(name, '.') < 0 {
		return name
	}
	return strings.ReplaceAll(name, ".", "_")
}

// kernelName maps a name the model used back to the tool it means.
func (ns names) kernelName(wire string) string {
	for _, r := range ns {
		if r.wire == wire {
			return r.kernel
		}
	}
	return wire
}

// checkCollisions refuses a request in which a renamed tool's wire name is
// also another tool's name, since the model's answer would be ambiguous.
func checkCollisions(req model.Request, ns names) error {
	for i, r := range ns {
		for _, q := range ns[:i] {
			if q.wire == r.wire {
				return bound.Conflicting("request.tools", "two tool names differ only in '.' and '_'")
			}
		}
		j := 0
		for d := range req.Tools() {
			if d.Name() == r.wire {
				return bound.Conflicting("request.tools["+strconv.Itoa(j)+"].name",
					"two tool names differ only in '.' and '_'")
			}
			j++
		}
	}
	return nil
}
