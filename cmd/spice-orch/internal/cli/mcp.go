package cli

import (
	"errors"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/render"
	"github.com/spice-orch/spice-orch/mcp/client"
)

func newMCPCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "mcp",
		Short: "Pin and inspect MCP servers",
		Long: `An MCP server's tools join a pair's plan beside the compiled tools. A
stdio server is listed in the spec's mcp_servers by absolute path and
pinned SHA-256 (and, when interpreted, its entry and lock file); an HTTP
server by URL, which cannot be pinned (docs/mcp.md).`,
		Example: `  spice-orch mcp digest /opt/node22/bin/node
  spice-orch mcp describe pair.yaml`,
	}
	cmd.AddCommand(newMCPDigestCmd(env), newMCPDescribeCmd(env))
	return cmd
}

func newMCPDigestCmd(env Env) *cobra.Command {
	return &cobra.Command{
		Use:     "digest PATH",
		Short:   "Print the SHA-256 to pin for an MCP server's executable, entry or lock file",
		Example: "  spice-orch mcp digest /opt/node22/bin/node",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			d, err := client.Digest(args[0])
			if err != nil {
				if errors.Is(err, client.ErrRelativePath) {
					return usageErr(err)
				}
				return failed(err)
			}
			_, err = fmt.Fprintln(env.Stdout, d)
			return err
		},
	}
}

func newMCPDescribeCmd(env Env) *cobra.Command {
	var workspace string
	cmd := &cobra.Command{
		Use:   "describe SPEC",
		Short: "Connect a spec's MCP servers and show each tool's digest and effect",
		Long: `describe connects every MCP server of the spec exactly as a pair would —
pins checked, session initialized, tools listed and verified — prints one
line per tool and stops every server's process tree. The columns say
whether the server is pinned, the tool definition's digest (pin it under
tools: NAME: digest), whether the spec pins it, and where the effect and
replay safety came from: declared (the spec), annotations (a pinned
server's hints, read conservatively) or default (mutating, unsafe).`,
		Example: "  spice-orch mcp describe --workspace /tmp/ws examples/mcp-pair.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := loadSpec(args)
			if err != nil {
				return usageErr(err)
			}
			var infos []client.Info
			for _, srv := range s.MCPServers {
				cfg, err := compose.MCPConfig(srv, workspace)
				if err != nil {
					return usageErr(err)
				}
				c, err := client.Connect(cmd.Context(), cfg)
				if err != nil {
					printMCPStderrTail(env.Stderr, err)
					return failed(err)
				}
				infos = append(infos, c.Info()...)
				_ = c.Close()
			}
			return printMCPInfo(env.Stdout, infos)
		},
	}
	cmd.Flags().StringVar(&workspace, "workspace", "", "the folder "+"{workspace}"+" stands for in args and dir")
	return cmd
}

func printMCPInfo(w io.Writer, infos []client.Info) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tCODE\tTOOL\tDIGEST\tDIGEST PIN\tEFFECT\tREPLAY\tFROM")
	for _, in := range infos {
		code, pin := "pinned", "no"
		if !in.Pinned {
			code = "unpinned"
		}
		if in.DigestPinned {
			pin = "yes"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", render.Field(in.Server), code, render.Field(in.Name),
			in.Digest, pin, in.Effect, in.Replay, in.From)
	}
	return tw.Flush()
}

func printMCPStderrTail(w io.Writer, err error) {
	var ce *client.ConnectError
	if errors.As(err, &ce) && len(ce.Stderr) > 0 {
		fmt.Fprintln(w, "mcp server stderr (last lines):")
		for _, l := range ce.Stderr[max(0, len(ce.Stderr)-20):] {
			fmt.Fprintln(w, "  "+render.Text(l))
		}
	}
}
