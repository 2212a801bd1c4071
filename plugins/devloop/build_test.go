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
