package conformance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"
)

// goFixture is a build of plugins/fixtures/goplugin (the Go SDK's serving
// code), made once for the package's tests. Building it imports nothing
// of it into the suite.
var goFixture string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "conformance-fixture-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	goFixture = filepath.Join(dir, "goplugin")
	cmd := exec.Command("go", "build", "-o", goFixture, "../fixtures/goplugin")
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the Go fixture:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	if code == 0 {
		// goleak.VerifyTestMain would exit before the build is removed.
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(dir)
	os.Exit(code)
}
