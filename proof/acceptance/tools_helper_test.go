package acceptance

import (
	"testing"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/tools"
)

// toolsFor returns the text.stats tool, standing in for a runtime tool
// that the pair never calls.
func toolsFor(*testing.T) ([]tool.Tool, error) {
	ts, err := tools.NewTextStats()
	if err != nil {
		return nil, err
	}
	return []tool.Tool{ts}, nil
}
