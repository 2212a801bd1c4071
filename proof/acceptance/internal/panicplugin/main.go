// Command panicplugin is the boundary proof's plugin whose tool panics
// inside the plugin process: it serves "echo" with the Go fixture's
// arguments, but as a mutating call, so that the panic, contained by the
// SDK's dispatcher, reaches the host as an uncertain outcome that must
// never be run again. The proof builds it into a temporary directory.
package main

import (
	"context"

	"github.com/spice-orch/spice-orch/functool"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/sdk"
)

type echoArgs struct {
	Text string `json:"text" desc:"the text to echo"`
}

func main() {
	echo := functool.Must(functool.Config{Name: "echo", Description: "Echoes its text, then panics.", Effect: tool.Mutating, Replay: tool.Unsafe},
		func(context.Context, echoArgs) (string, error) { panic("proof: injected plugin panic") })
	sdk.Main(sdk.Config{Name: "panicky", Version: "1.0.0", Tools: []tool.Tool{echo}})
}
