package cli

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/plugins/host"
)

func newPluginCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "plugin",
		Short: "Pin and inspect runtime tool plugins",
		Long: `A runtime tool plugin is a separate process that serves tools over
plugin/v1 (plugins/PROTOCOL.md). A pair spec lists it by absolute path and
pinned SHA-256; its tools join the pair's plan beside the compiled tools.`,
		Example: `  spice-orch plugin digest /opt/plugins/wordcount
  spice-orch plugin describe --sha256 HEX /opt/plugins/wordcount
  spice-orch plugin pin pair.yaml 0 /opt/plugins/wordcount-1.1
  spice-orch plugin conformance --sha256 HEX /opt/plugins/fixture
  spice-orch plugin dev ./plugins/examples/wordcount`,
	}
	cmd.AddCommand(newPluginDigestCmd(env), newPluginDescribeCmd(env), newPluginPinCmd(env), newPluginConformanceCmd(env), newPluginDevCmd(env))
	return cmd
}

// pinFiles are the --root and --file flags: the files an interpreted
// plugin loads, which its pin covers with the executable.
type pinFiles struct {
	root  string
	files []string
}

func (f *pinFiles) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.root, "root", "", "the absolute directory the --file paths are relative to")
	cmd.Flags().StringSliceVar(&f.files, "file", nil, "a file or directory (relative to --root) the plugin loads: its sources and its lock file (repeatable)")
}

func newPluginDigestCmd(env Env) *cobra.Command {
	var pf pinFiles
	cmd := &cobra.Command{
		Use:   "digest PATH",
		Short: "Print the SHA-256 to pin for a plugin executable",
		Example: `  spice-orch plugin digest /opt/plugins/wordcount
  spice-orch plugin digest --root /opt/plugins/py --file pkg --file requirements.txt /opt/plugins/py/launcher`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := host.DigestFiles(args[0], pf.root, pf.files)
			if err != nil {
				if errors.Is(err, host.ErrRelativePath) || errors.Is(err, host.ErrConfig) {
					return usageErr(err)
				}
				return failed(err)
			}
			_, err = fmt.Fprintln(env.Stdout, d)
			return err
		},
	}
	pf.flags(cmd)
	return cmd
}

func newPluginDescribeCmd(env Env) *cobra.Command {
	var pin string
	var pf pinFiles
	cmd := &cobra.Command{
		Use:   "describe --sha256 HEX PATH",
		Short: "Launch a plugin, verify it and print its manifest",
		Long: `describe launches the plugin at PATH exactly as a pair would — digest
check of the bytes executed, fresh secret, handshake, manifest verified
against the kernel's tool contracts — prints the manifest and stops the
plugin's whole process tree.`,
		Example: "  spice-orch plugin describe --sha256 $(spice-orch plugin digest /opt/plugins/wordcount) /opt/plugins/wordcount",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if pin == "" {
				return usageErr(errors.New("--sha256 is required (spice-orch plugin digest PATH prints it)"))
			}
			p, err := host.Launch(cmd.Context(), host.Config{Path: args[0], SHA256: pin, Root: pf.root, Files: pf.files})
			if err != nil {
				if errors.Is(err, host.ErrRelativePath) || errors.Is(err, host.ErrConfig) {
					return usageErr(err)
				}
				printStderrTail(env.Stderr, err)
				return failed(err)
			}
			m := p.Manifest()
			closeErr := p.Close()
			if err := printManifest(env.Stdout, m); err != nil {
				return err
			}
			return closeErr
		},
	}
	cmd.Flags().StringVar(&pin, "sha256", "", "the pinned SHA-256 of the executable (64 lower-case hex)")
	pf.flags(cmd)
	return cmd
}

func printStderrTail(w io.Writer, err error) {
	var le *host.LaunchError
	if errors.As(err, &le) && len(le.Stderr) > 0 {
		fmt.Fprintln(w, "plugin stderr (last lines):")
		for _, l := range le.Stderr[max(0, len(le.Stderr)-20):] {
			fmt.Fprintln(w, "  "+l)
		}
	}
}

func printManifest(w io.Writer, m host.Manifest) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "plugin\t%s %s (protocol %d)\n", m.Name, m.Version, m.Protocol)
	fmt.Fprintf(tw, "path\t%s\n", m.Path)
	fmt.Fprintf(tw, "sha256\t%s\n", m.Digest)
	b := m.Bounds
	fmt.Fprintf(tw, "bounds\trequest %d B, response %d B, %d calls at once, call timeout %s\n",
		b.MaxRequestBytes, b.MaxResponseBytes, b.MaxConcurrentCalls, b.CallTimeout)
	fmt.Fprintf(tw, "tools\t%d\n", len(m.Tools))
	if err := tw.Flush(); err != nil {
		return err
	}
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tEFFECT\tREPLAY\tCAPABILITIES\tFINGERPRINT\tDESCRIPTION")
	for _, d := range m.Tools {
		caps := slices.Collect(d.Capabilities())
		cs := make([]string, len(caps))
		for i, c := range caps {
			cs[i] = string(c)
		}
		capText := strings.Join(cs, ",")
		if capText == "" {
			capText = "-"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", d.Name(), d.Effect(), d.Replay(), capText,
			d.Fingerprint().String()[:12], d.Description())
	}
	return tw.Flush()
}
