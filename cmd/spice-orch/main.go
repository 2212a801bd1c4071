// Command spice-orch runs two cooperating agents as a pair. See
// internal/cli for the commands and exit codes, and README.md for a tour.
package main

import (
	"context"
	"os"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/cli"
)

func main() {
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}))
}
