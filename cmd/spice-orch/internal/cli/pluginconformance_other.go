//go:build !unix

package cli

import (
	"errors"

	"github.com/spf13/cobra"
)

func newPluginConformanceCmd(Env) *cobra.Command {
	return &cobra.Command{
		Use:   "conformance --sha256 HEX PATH",
		Short: "Run the plugin/v1 conformance suite (Unix only)",
		RunE: func(*cobra.Command, []string) error {
			return failed(errors.New("the conformance suite's launcher needs Unix process groups"))
		},
	}
}
