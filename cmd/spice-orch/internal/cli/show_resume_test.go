//go:build unix

package cli

import (
	"bufio"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// waitEnd reads the pair's event stream to its end event.
func waitEnd(t *testing.T, base, pairID string) {
	t.Helper()
	resp, err := http.Get(base + "/v1/pairs/" + pairID + "/events")
	require.NoError(t, err)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if sc.Text() == "event: end" {
			return
		}
	}
	t.Fatalf("the stream of %s ended without its end event: %v", pairID, sc.Err())
}

// TestR3_RunsShowNamesTheRunThatReplacedACutOne: after a resume, the run
// that was cut off is shown replaced by the run that took its place,
// not as interrupted, and the pair says it was resumed: one continuous
// pair.
func TestR3_RunsShowNamesTheRunThatReplacedACutOne(t *testing.T) {
	db, data, pairID := interruptedPair(t)
	stdout, stderr, code := call(t, nil, "runs", "show", pairID, "--store", db)
	require.Equal(t, 0, code, stderr)
	cut := regexp.MustCompile(`(?m)^\s+(\S+)\s+writer\s+interrupted\b`).FindStringSubmatch(stdout)
	require.NotNil(t, cut, stdout)

	ts := startTestServerWith(t, func(f *serveFlags) { f.store, f.dataDir = db, data }, nil)
	status, body := postPath(t, ts.url+"/v1/pairs/"+pairID+"/resume")
	require.Equal(t, http.StatusAccepted, status, body)
	waitEnd(t, ts.url, pairID)
	ts.stop()
	<-ts.stopped(t)

	stdout, stderr, code = call(t, nil, "runs", "show", pairID, "--store", db)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "completed")
	require.Regexp(t, `(?m)^resumed\s+1 time\(s\), last after sequence \d+$`, stdout)
	line := regexp.MustCompile(`(?m)^\s+` + regexp.QuoteMeta(cut[1]) + `\s+writer\s+(.*)$`).FindStringSubmatch(stdout)
	require.NotNil(t, line, stdout)
	require.NotContains(t, line[1], "interrupted", "the cut-off run is shown replaced")
	by := regexp.MustCompile(`^replaced by (\S+)`).FindStringSubmatch(line[1])
	require.NotNil(t, by, line[1])
	require.NotEqual(t, cut[1], by[1])
	require.Regexp(t, `(?m)^\s+`+regexp.QuoteMeta(by[1])+`\s+writer\s+completed\b`, stdout, "the run that replaced it is listed, completed")
	require.True(t, strings.HasPrefix(by[1], pairID+"/writer/"), by[1])
}

func postPath(t *testing.T, u string) (int, string) {
	t.Helper()
	resp, err := http.Post(u, "application/json", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = bufio.NewReader(resp.Body).WriteTo(&b)
	require.NoError(t, err)
	return resp.StatusCode, b.String()
}
