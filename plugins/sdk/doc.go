// Package sdk is what a plugin author imports to serve tools over
// plugin/v1. A plugin's main is a few lines:
//
//	func main() {
//		echo := functool.Must(functool.Config{Name: "echo", Effect: tool.ReadOnly, Replay: tool.Safe},
//			func(ctx context.Context, a struct{ Text string `json:"text"` }) (string, error) { return a.Text, nil })
//		sdk.Main(sdk.Config{Name: "echo", Version: "1.0.0", Tools: []tool.Tool{echo}})
//	}
//
// Serve reads the launch secret from stdin, listens on a Unix socket in the
// host's private directory, prints the one handshake line, answers only
// calls that carry the host's authentication, runs every call behind the
// kernel's canonical dispatcher (so a plugin's outcomes obey the same
// contract as a compiled tool's), and exits when the host asks it to or
// closes stdin. A plugin must write nothing else to stdout: log to stderr.
//
// It must not know about the host's processes, plans or runs.
package sdk
