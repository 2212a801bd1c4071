//go:build unix

package cli

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/plugins/conformance"
	"github.com/spice-orch/spice-orch/plugins/host"
)

// conformanceBound bounds a whole conformance run: every case has its own
// bound inside it.
const conformanceBound = 5 * time.Minute

func newPluginConformanceCmd(env Env) *cobra.Command {
	var pin string
	var only []string
	var pf pinFiles
	cmd := &cobra.Command{
		Use:   "conformance --sha256 HEX PATH",
		Short: "Run the plugin/v1 conformance suite against a plugin",
		Long: `conformance runs the host-owned plugin/v1 suite (plugins/conformance) against
the plugin at PATH: handshake and secret, protocol negotiation, manifest,
the conformance tool profile (plugins/PROTOCOL.md), cancellation,
deadline, unknown fields, oversized messages and shutdown. Each case
launches or reuses a verified process; every process is stopped before
the command returns. It prints one line per case and exits 0 when every
case passed, 1 when one failed.`,
		Example: "  spice-orch plugin conformance --sha256 $(spice-orch plugin digest /opt/plugins/fixture) /opt/plugins/fixture",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pin == "" {
				return usageErr(errors.New("--sha256 is required (spice-orch plugin digest PATH prints it)"))
			}
			if !filepath.IsAbs(args[0]) {
				return usageErr(host.ErrRelativePath)
			}
			// A wrong pin would fail every case for one reason: say it once.
			d, err := host.DigestFiles(args[0], pf.root, pf.files)
			if err != nil {
				return failed(err)
			}
			if subtle.ConstantTimeCompare([]byte(d), []byte(pin)) != 1 {
				return failed(fmt.Errorf("%s: digest mismatch: the file's SHA-256 is not the pinned one", args[0]))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), conformanceBound)
			defer cancel()
			rs, err := conformance.Run(ctx, conformance.Config{
				Launcher: conformance.ProcessLauncher{Path: args[0], SHA256: pin, Root: pf.root, Files: pf.files},
				Only:     only,
			})
			if err != nil {
				return usageErr(err)
			}
			if err := conformance.WriteTable(env.Stdout, rs); err != nil {
				return err
			}
			if !conformance.Passed(rs) {
				return &exitError{code: ExitFailed}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&pin, "sha256", "", "the pinned SHA-256 of the executable (64 lower-case hex)")
	cmd.Flags().StringSliceVar(&only, "case", nil, "run only these cases (repeatable; names as in the table)")
	pf.flags(cmd)
	return cmd
}
