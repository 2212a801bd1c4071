// Command wordcount is a complete runtime tool plugin: one typed function,
// served over plugin/v1 by the Go SDK. examples/plugin-pair.sh builds it,
// pins it and runs a pair whose reviewer calls it.
//
//	go build -o /tmp/wordcount ./plugins/examples/wordcount
//	spice-orch plugin digest /tmp/wordcount
//	spice-orch plugin describe --sha256 <digest> /tmp/wordcount
package main

import (
	"context"
	"strings"

	"github.com/spice-orch/spice-orch/functool"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/sdk"
)

type countArgs struct {
	Text string `json:"text" desc:"the text to count"`
}

type counts struct {
	Words int `json:"words"`
	Lines int `json:"lines"`
}

func main() {
	count := functool.Must(functool.Config{
		Name: "words.count", Description: "Counts the words and lines of a text.",
		Effect: tool.ReadOnly, Replay: tool.Safe,
	}, func(_ context.Context, a countArgs) (counts, error) {
		return counts{Words: len(strings.Fields(a.Text)), Lines: strings.Count(a.Text, "\n") + 1}, nil
	})
	sdk.Main(sdk.Config{Name: "wordcount", Version: "1.0.0", Tools: []tool.Tool{count}})
}
