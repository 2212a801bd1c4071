package spec_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
)

func TestP1_SpecPluginsNeedAnAbsolutePathAndAPin(t *testing.T) {
	s, err := spec.DecodeFile("../../../../examples/plugin-pair.yaml")
	require.NoError(t, err)
	require.Equal(t, []spec.Plugin{{Path: "/path/to/wordcount", SHA256: strings.Repeat("0", 64), Name: "wordcount",
		Bounds: spec.PluginBounds{StartupTimeout: 10 * time.Second, CallTimeout: 5 * time.Second},
		Line:   s.Plugins[0].Line, PinLine: s.Plugins[0].PinLine}}, s.Plugins)
	require.NotZero(t, s.Plugins[0].Line)
	require.Equal(t, s.Plugins[0].Line+1, s.Plugins[0].PinLine)

	pin := strings.Repeat("a", 64)
	for entry, want := range map[string]string{
		`{path: wordcount, sha256: "` + pin + `"}`:                          "plugins[0].path: must be a clean absolute path",
		`{path: ./bin/wordcount, sha256: "` + pin + `"}`:                    "plugins[0].path: must be a clean absolute path",
		`{path: /bin/x, sha256: "ABC"}`:                                     "plugins[0].sha256: must be 64 lower-case hex",
		`{path: /bin/x}`:                                                    "plugins[0].sha256: required",
		`{path: /bin/x, sha256: "` + pin + `", dir: /tmp}`:                  `unknown field "dir"`,
		`{path: /bin/x, sha256: "` + pin + `", bounds: {call_timeout: 0s}}`: "plugins[0].bounds.call_timeout: must be positive",
		`{path: /bin/x, sha256: "` + pin + `", name: "Bad Name"}`:           "plugins[0].name",
	} {
		_, err := spec.Decode("p.yaml", []byte(minimal+"plugins:\n  - "+entry+"\n"))
		var se *spec.Error
		require.True(t, errors.As(err, &se), entry)
		require.Contains(t, err.Error(), want, entry)
	}
}

// An interpreted plugin names the files its pin covers: root and files,
// together, inside root.
func TestP1_SpecPluginsNameTheFilesTheirPinCovers(t *testing.T) {
	pin := strings.Repeat("a", 64)
	s, err := spec.Decode("p.yaml", []byte(minimal+"plugins:\n  - {path: /opt/py/launcher, sha256: \""+pin+
		"\", root: /opt/py/src, files: [pkg, requirements.txt]}\n"))
	require.NoError(t, err)
	require.Equal(t, "/opt/py/src", s.Plugins[0].Root)
	require.Equal(t, []string{"pkg", "requirements.txt"}, s.Plugins[0].Files)
	for entry, want := range map[string]string{
		`root: /opt/py`:                     "root and files go together",
		`files: [pkg]`:                      "root and files go together",
		`root: py, files: [pkg]`:            "plugins[0].root: must be a clean absolute path",
		`root: /opt/py, files: []`:          "plugins[0].files: 1 to 64 paths",
		`root: /opt/py, files: [../x]`:      "plugins[0].files[0]: must be a clean relative path",
		`root: /opt/py, files: [/etc]`:      "plugins[0].files[0]: must be a clean relative path",
		`root: /opt/py, files: [a/../../b]`: "plugins[0].files[0]: must be a clean relative path",
		`root: /opt/py, files: [{a: b}]`:    "plugins[0].files[0]: want a string",
	} {
		_, err := spec.Decode("p.yaml", []byte(minimal+"plugins:\n  - {path: /bin/x, sha256: \""+pin+"\", "+entry+"}\n"))
		var se *spec.Error
		require.True(t, errors.As(err, &se), entry)
		require.Contains(t, err.Error(), want, entry)
	}
}
