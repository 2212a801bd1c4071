package devloop

import (
	"strings"
	"testing"
)

// FuzzParseDiagnostics: the go command's output is outside bytes; any of
// it gives a bounded list of bounded diagnostics, each a location with a
// positive line or a message alone.
func FuzzParseDiagnostics(f *testing.F) {
	f.Add("# example.com/p\n./main.go:12:2: undefined: x\n")
	f.Add("go: updates to go.mod needed\n")
	f.Add("main.go:1: a\r\nb.go:99999999999999999999: c\n")
	f.Fuzz(func(t *testing.T, out string) {
		ds := parseDiagnostics(out)
		if len(ds) == 0 || len(ds) > maxDiagnostics+1 {
			t.Fatalf("%d diagnostics", len(ds))
		}
		for _, d := range ds {
			if len(d.Message) > maxDiagnosticBytes+len("…") {
				t.Fatalf("a message of %d bytes", len(d.Message))
			}
			if d.File != "" && (d.Line <= 0 || strings.ContainsAny(d.File, " \n")) {
				t.Fatalf("bad location %q", d.String())
			}
		}
	})
}

func TestL3_DiagnosticsAreFileLineMessage(t *testing.T) {
	out := "# example.com/p\n./main.go:12:2: undefined: x\n./sub/a.go:3: syntax error\ngo: a message without a place\n"
	var got []string
	for _, d := range parseDiagnostics(out) {
		got = append(got, d.String())
	}
	want := []string{"main.go:12: undefined: x", "sub/a.go:3: syntax error", "go: a message without a place"}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// FuzzCheckLock: a lock file is outside bytes; any of it gives a bounded
// list of diagnostics, each at a positive line of the file.
func FuzzCheckLock(f *testing.F) {
	f.Add("grpcio==1.70.0 \\\n    --hash=sha256:ab \\\n    --hash=sha256:cd\n    # via -r requirements.in\n")
	f.Add("six==1.16.0\n-e .\n--index-url https://x\nflask>=2 --hash=sha256:00 # why\n")
	f.Add("a==1 \\")
	f.Fuzz(func(t *testing.T, lock string) {
		ds := checkLock("requirements.txt", []byte(lock))
		if len(ds) > maxDiagnostics {
			t.Fatalf("%d diagnostics", len(ds))
		}
		n := strings.Count(lock, "\n") + 1
		for _, d := range ds {
			if d.File != "requirements.txt" || d.Line < 1 || d.Line > n || len(d.Message) > maxDiagnosticBytes {
				t.Fatalf("bad diagnostic %q", d.String())
			}
		}
	})
}

func TestL3_ALockFileThatIsNotHashLockedIsRefusedAtItsLine(t *testing.T) {
	lock := "# a comment\n" +
		"grpcio==1.70.0 \\\n    --hash=sha256:ab\n    # via -r requirements.in\n" + // 2-4: locked
		"six==1.16.0\n" + // 5: no hash
		"flask>=2 --hash=sha256:00\n" + // 6: no one version
		"--require-hashes\n" + // 7: an option
		"-e ./local\n" // 8: editable
	var got []string
	for _, d := range checkLock("requirements.txt", []byte(lock)) {
		got = append(got, d.String())
	}
	want := []string{
		`requirements.txt:5: "six==1.16.0" has no --hash=sha256: the lock file is not hash-locked`,
		`requirements.txt:6: "flask>=2" is not pinned to one version (==)`,
		`requirements.txt:8: "-e" is an editable requirement, which no hash locks`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got %q, want %q", got, want)
	}
}
