package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/compose"
	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/plugins/host"
)

func newPluginPinCmd(env Env) *cobra.Command {
	var pin string
	return withPinFlag(&cobra.Command{
		Use:   "pin SPEC INDEX PATH",
		Short: "Re-pin a spec's plugin to a new build, verified, for future runs",
		Long: `pin rolls a new build of a plugin into a pair spec: it launches and
verifies the executable at PATH (with --sha256, against that pin; without,
against the digest of the file as it is now), then rewrites the path and
sha256 of plugins[INDEX] in SPEC in place. Runs started after it use the
new build; pairs already running finish on the generation they leased.
A build that fails verification changes nothing.`,
		Example: "  spice-orch plugin pin examples/plugin-pair.yaml 0 /opt/plugins/wordcount-1.1",
		Args:    cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			file, path := args[0], args[2]
			i, err := strconv.Atoi(args[1])
			if err != nil || i < 0 {
				return usageErr(errors.New("INDEX must be a plugin's index in the spec's plugins list"))
			}
			s, err := spec.DecodeFile(file)
			if err != nil {
				return usageErr(err)
			}
			if i >= len(s.Plugins) {
				return usageErr(fmt.Errorf("%s lists %d plugins; there is no plugins[%d]", file, len(s.Plugins), i))
			}
			if pin == "" {
				if pin, err = host.DigestFiles(path, s.Plugins[i].Root, s.Plugins[i].Files); err != nil {
					return usageErr(err)
				}
			}
			old := s.Plugins[i]
			next := old
			next.Path, next.SHA256 = path, pin
			p, err := host.Launch(cmd.Context(), compose.PluginConfig(next))
			if err != nil {
				printStderrTail(env.Stderr, err)
				if errors.Is(err, host.ErrRelativePath) || errors.Is(err, host.ErrConfig) {
					return usageErr(err)
				}
				return failed(fmt.Errorf("the new build was refused; %s is unchanged: %w", file, err))
			}
			m := p.Manifest()
			if err := p.Close(); err != nil {
				return failed(err)
			}
			if err := rewritePin(file, i, path, pin, ""); err != nil {
				return failed(err)
			}
			_, err = fmt.Fprintf(env.Stdout, "%s: plugins[%d] pinned to %s %s (sha256 %s, was %s)\nruns started from now use it; running pairs finish on their generation\n",
				file, i, m.Name, m.Version, pin, old.SHA256)
			return err
		},
	}, &pin)
}

func withPinFlag(cmd *cobra.Command, pin *string) *cobra.Command {
	cmd.Flags().StringVar(pin, "sha256", "", "the pin of the new build (default: the digest of PATH now)")
	return cmd
}

// rewritePin replaces the path and sha256 values of plugins[i] in the spec
// file in place, and its root when root is not "", keeping every other
// byte, and checks the result decodes.
func rewritePin(file string, i int, path, pin, root string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || len(doc.Content) != 1 {
		return errors.New("cannot parse " + file)
	}
	nodes := pluginNodes(doc.Content[0], i)
	field := "plugins[" + strconv.Itoa(i) + "]"
	if nodes["path"] == nil || nodes["sha256"] == nil {
		return errors.New(file + ": " + field + " has no path or sha256 to rewrite")
	}
	values := map[string]string{"path": path, "sha256": pin}
	if root != "" {
		if nodes["root"] == nil {
			return errors.New(file + ": " + field + " has no root to rewrite: a Python plugin's entry names its root and files")
		}
		values["root"] = root
	}
	lines := strings.SplitAfter(string(data), "\n")
	// The later nodes first, so that an earlier one's column stays right.
	var order []*yaml.Node
	byNode := map[*yaml.Node]string{}
	for k, v := range values {
		order = append(order, nodes[k])
		byNode[nodes[k]] = v
	}
	slices.SortFunc(order, func(a, b *yaml.Node) int {
		if a.Line != b.Line {
			return b.Line - a.Line
		}
		return b.Column - a.Column
	})
	for _, n := range order {
		if err := replaceScalar(lines, n, byNode[n]); err != nil {
			return errors.New(file + ": " + err.Error() + "; edit " + field + " by hand")
		}
	}
	out := strings.Join(lines, "")
	if _, err := spec.Decode(file, []byte(out)); err != nil {
		return err
	}
	tmp := filepath.Join(filepath.Dir(file), "."+filepath.Base(file)+".pin")
	if err := os.WriteFile(tmp, []byte(out), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}

// pluginNodes returns the scalar values of plugins[i]'s path, sha256 and
// root, by key.
func pluginNodes(root *yaml.Node, i int) map[string]*yaml.Node {
	nodes := map[string]*yaml.Node{}
	for k := 0; k+1 < len(root.Content); k += 2 {
		if root.Content[k].Value != "plugins" || root.Content[k+1].Kind != yaml.SequenceNode || i >= len(root.Content[k+1].Content) {
			continue
		}
		entry := root.Content[k+1].Content[i]
		for j := 0; j+1 < len(entry.Content); j += 2 {
			switch key := entry.Content[j].Value; key {
			case "path", "sha256", "root":
				if entry.Content[j+1].Kind == yaml.ScalarNode {
					nodes[key] = entry.Content[j+1]
				}
			}
		}
	}
	return nodes
}

// replaceScalar swaps the scalar n for v in the same style.
func replaceScalar(lines []string, n *yaml.Node, v string) error {
	var was, now string
	switch n.Style {
	case 0:
		was, now = n.Value, v
	case yaml.DoubleQuotedStyle:
		was, now = `"`+n.Value+`"`, `"`+v+`"`
	case yaml.SingleQuotedStyle:
		was, now = `'`+n.Value+`'`, `'`+v+`'`
	default:
		return errors.New("an unusual YAML style")
	}
	if strings.ContainsAny(v, "\"'\\#:\n") || n.Line < 1 || n.Line > len(lines) {
		return errors.New("a value that needs quoting")
	}
	l, c := lines[n.Line-1], n.Column-1
	if c < 0 || !strings.HasPrefix(l[c:], was) {
		return errors.New("a value written in a way this command does not rewrite")
	}
	lines[n.Line-1] = l[:c] + now + l[c+len(was):]
	return nil
}

// checkPluginFiles refuses, at its line, a plugin entry of s that a launch
// would refuse for its file: a path that names nothing, a directory, a
// device or another file that is not regular, a file nobody may execute,
// or bytes (with the files it loads) that do not hash to the pin. The
// launch checks again.
func checkPluginFiles(s spec.Spec) error {
	for i, p := range s.Plugins {
		field := "plugins[" + strconv.Itoa(i) + "]"
		bad := func(line int, name, msg string) error {
			return &spec.Error{File: s.File, Line: line, Field: field + "." + name, Msg: msg}
		}
		// Stat, not open: opening a FIFO would wait for a writer.
		fi, err := os.Stat(p.Path)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return bad(p.Line, "path", "no file at this path")
		case err != nil:
			return bad(p.Line, "path", "cannot be read")
		case fi.IsDir():
			return bad(p.Line, "path", "is a directory, not an executable file")
		case fi.Mode()&os.ModeDevice != 0:
			return bad(p.Line, "path", "is a device, not an executable file")
		case !fi.Mode().IsRegular():
			return bad(p.Line, "path", "is not a regular file")
		case fi.Mode().Perm()&0o111 == 0:
			return bad(p.Line, "path", "is not executable")
		}
		got, err := host.DigestFiles(p.Path, p.Root, p.Files)
		if err != nil {
			return bad(p.Line, "path", "cannot be pinned: "+errorReason(err))
		}
		if got != p.SHA256 {
			return bad(p.PinLine, "sha256", "does not match the file (its SHA-256 is "+got+")")
		}
	}
	return nil
}

// errorReason is a launch error's reason without its path, which the spec
// line already names.
func errorReason(err error) string {
	var le *host.LaunchError
	if errors.As(err, &le) && le.Reason != "" {
		return le.Reason
	}
	return "cannot read"
}
