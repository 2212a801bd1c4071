package devloop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// goCmd is the go command; moduleFiles are a go.mod and go.sum with
// which a plugin folder outside this module builds against it.
var (
	goCmd       string
	moduleFiles map[string][]byte
)

func TestMain(m *testing.M) {
	code, err := setup()
	if err != nil {
		fmt.Fprintln(os.Stderr, "devloop tests:", err)
		os.Exit(2)
	}
	if code = m.Run(); code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// setup resolves the module's requirements for a plugin folder once: a
// build with -mod=mod from the module cache (no network) completes its
// go.mod, which every test folder then copies.
func setup() (int, error) {
	g, err := exec.LookPath("go")
	if err != nil {
		return 0, err
	}
	if goCmd, err = filepath.Abs(g); err != nil {
		return 0, err
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		return 0, err
	}
	dir, err := os.MkdirTemp("", "devloop-module-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return 0, err
	}
	mod := "module example.com/devplug\n\ngo 1.26.0\n\nrequire github.com/spice-orch/spice-orch v0.0.0\n\nreplace github.com/spice-orch/spice-orch => " + root + "\n"
	files := map[string][]byte{"go.mod": []byte(mod), "go.sum": sum, "main.go": []byte(pluginSource("0.0.0", valid))}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return 0, err
		}
	}
	cmd := exec.Command(goCmd, "build", "-mod=mod", "-o", os.DevNull, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOPROXY=off", "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("resolving the test module: %v\n%s", err, out)
	}
	moduleFiles = map[string][]byte{}
	for _, n := range []string{"go.mod", "go.sum"} {
		if moduleFiles[n], err = os.ReadFile(filepath.Join(dir, n)); err != nil {
			return 0, err
		}
	}
	return 0, nil
}

// brokenLine is the line of main.go that a broken source breaks.
const brokenLine = 12

// Modes of pluginSource at brokenLine.
const (
	valid  = ""
	broken = "var _ = undefinedThing"                              // does not build
	stdout = "func init() { os.Stdout.WriteString(\"hello\\n\") }" // builds, fails verification
)

// pluginSource is a plugin whose tool dev.version says its version; with
// DEVTEST_CHILD=1 it starts a child process, so that a generation is a
// tree of processes. mode is line brokenLine.
func pluginSource(version, mode string) string {
	bad := mode
	return strings.Join([]string{
		"package main", // 1
		"",
		"import (",
		"\t\"context\"",
		"\t\"os\"",
		"\t\"os/exec\"",
		"",
		"\t\"github.com/spice-orch/spice-orch/functool\"",
		"\t\"github.com/spice-orch/spice-orch/kernel/tool\"",
		"\t\"github.com/spice-orch/spice-orch/plugins/sdk\"",
		")",
		bad, // 12
		"const version = \"" + version + "\"",
		"",
		"type noArgs struct{}",
		"",
		"type answer struct {",
		"\tVersion string `json:\"version\"`",
		"}",
		"",
		"func main() {",
		"\tif os.Getenv(\"DEVTEST_CHILD\") == \"1\" {",
		"\t\t_ = exec.Command(\"/bin/sleep\", \"300\").Start()",
		"\t}",
		"\tv := functool.Must(functool.Config{Name: \"dev.version\", Description: \"Says the plugin's version.\", Effect: tool.ReadOnly, Replay: tool.Safe},",
		"\t\tfunc(context.Context, noArgs) (answer, error) { return answer{Version: version}, nil })",
		"\tsdk.Main(sdk.Config{Name: \"devplug\", Version: version, Tools: []tool.Tool{v}})",
		"}",
		"",
	}, "\n")
}
