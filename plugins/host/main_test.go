package host

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// fixtureV1 and fixtureV2 are two builds of plugins/fixtures/goplugin that
// differ in their version, made once for the package's tests.
var fixtureV1, fixtureV2 string

func TestMain(m *testing.M) {
	serveFloorIfAsked()
	dir, err := os.MkdirTemp("", "plugin-fixture-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fixtureV1, fixtureV2 = filepath.Join(dir, "goplugin-v1"), filepath.Join(dir, "goplugin-v2")
	for out, v := range map[string]string{fixtureV1: "1.0.0", fixtureV2: "2.0.0"} {
		cmd := exec.Command("go", "build", "-o", out, "-ldflags", "-X main.version="+v, "../fixtures/goplugin")
		cmd.Stderr = os.Stderr
		if err := cmd.Run(); err != nil {
			fmt.Fprintln(os.Stderr, "building the fixture:", err)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	code := m.Run()
	if code == 0 {
		// goleak.VerifyTestMain would exit before the fixtures are removed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
