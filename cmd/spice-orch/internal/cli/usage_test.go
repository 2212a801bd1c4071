package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(t *testing.T, dir, name, text string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
	return path
}

const validSpec = "pattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n  - role: reviewer\n    provider: scripted\n"

// Usage mistakes, one case each: every one exits 2 and names what was
// wrong (the file and line, the flag, the bound) in words a user can act
// on, never an internal field.
func TestUsageMistakesAreNamedAndExitTwo(t *testing.T) {
	dir := t.TempDir()
	valid := writeFile(t, dir, "ok.yaml", validSpec)
	badJSON := writeFile(t, dir, "bad.json", "{\"pattern\": \"relay\",\n \"workers\": [x]}\n")
	huge := writeFile(t, dir, "huge.yaml", validSpec+"limits: {max_rounds: 99999999999999999999}\n")
	args := writeFile(t, dir, "args.yaml", "pattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n"+
		"      - text: hi\n      - calls: [{name: fs.write, arguments: {path: a.txt}}]\n  - role: reviewer\n    provider: scripted\n")
	types := writeFile(t, dir, "types.yaml", "pattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n"+
		"      - calls:\n          - name: fs.read\n            arguments: {path: 7}\n  - role: reviewer\n    provider: scripted\n")
	unknown := writeFile(t, dir, "unknown.yaml", "pattern: relay\nworkers:\n  - role: writer\n    provider: scripted\n    script:\n"+
		"      - calls:\n          - name: fs.read\n            arguments: {path: a, mode: 1}\n  - role: reviewer\n    provider: scripted\n")

	for name, c := range map[string]struct {
		args   []string
		stdout string
		stderr []string
	}{
		"validate takes several files": {[]string{"validate", valid, badJSON, valid}, valid + ": valid",
			[]string{badJSON + ":2: JSON syntax: invalid character looking for beginning of value", "1 of 3 specs are invalid"}},
		"a number too large": {[]string{"validate", huge}, "",
			[]string{huge + ":7: limits.max_rounds: too large for an integer: must be between 1 and 1000"}},
		"script arguments are checked": {[]string{"validate", args}, "",
			[]string{args + ":7: workers[0].script[1].calls[0].arguments: fs.write needs the argument content"}},
		"argument types are checked": {[]string{"validate", types}, "",
			[]string{types + ":7: workers[0].script[0].calls[0].arguments: the argument path of fs.read must be a string"}},
		"unknown arguments are named": {[]string{"validate", unknown}, "",
			[]string{unknown + ":7: workers[0].script[0].calls[0].arguments: fs.read has no such argument: the unknown argument mode (it takes path)"}},
		"an unknown subcommand":   {[]string{"runs", "compare", "x", "y"}, "", []string{`unknown command "compare" for "spice-orch runs"`}},
		"an empty --store (run)":  {[]string{"run", "--store", ""}, "", []string{"--store must not be empty"}},
		"an empty --store (runs)": {[]string{"runs", "list", "--store", ""}, "", []string{"--store must not be empty"}},
		"--workspace names a file": {[]string{"run", "--workspace", valid, "--no-store"}, "",
			[]string{"--workspace " + valid + ": not a directory"}},
		"--limit names its flag": {[]string{"runs", "list", "--limit", "-1", "--store", filepath.Join(dir, "none.db")}, "",
			[]string{"--limit must be between 1 and 10000"}},
	} {
		t.Run(name, func(t *testing.T) {
			stdout, stderr, code := call(t, nil, c.args...)
			require.Equal(t, ExitUsage, code, stderr)
			require.Contains(t, stdout, c.stdout)
			for _, want := range c.stderr {
				require.Contains(t, stderr, want)
			}
		})
	}
}
