//go:build unix

package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// countPair is a relay whose writer calls the plugin's tool.
const countPair = `version: 1
name: dev-pair
pattern: relay
approve: never
workers:
  - role: writer
    provider: scripted
    script:
      - calls:
          - name: words.count
            arguments: {text: "one two three"}
      - text: counted
  - role: reviewer
    provider: scripted
    script:
      - text: ok
`

// playCount starts countPair on serve and returns its timeline once the
// pair has ended (the JSON lines stream ends after the terminal).
func playCount(t *testing.T, url string) string {
	t.Helper()
	status, body := post(t, url, "application/yaml", countPair)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	resp, err := http.Get(url + "/v1/pairs/" + created.ID + "/events.jsonl")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return string(b)
}

// TestL3_PluginDevServeShowsTheActiveGenerationAndWhyACandidateFailed runs
// `plugin dev --serve` over the example plugin with real builds and
// Chromium on its page: the page shows the active generation; a broken
// save shows the candidate's failure at its FILE:LINE, as text, with the
// generation that stays active, and a pair started meanwhile plays the
// last good build; the fix shows the next generation.
func TestL3_PluginDevServeShowsTheActiveGenerationAndWhyACandidateFailed(t *testing.T) {
	ctx, cancel := newBrowser(t)
	defer cancel()
	dir, src := wordcountModule(t)
	tmp := t.TempDir()
	out := &lines{grew: make(chan struct{}, 1)}
	dctx, stop := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- Main(dctx, []string{"plugin", "dev", "--out", filepath.Join(tmp, "builds"), "--debounce", "50ms",
			"--serve", "127.0.0.1:0", "--store", filepath.Join(tmp, "runs.db"), dir},
			Env{Stdout: out, Stderr: out, Getenv: func(string) string { return "" }})
	}()
	defer func() {
		stop()
		require.Equal(t, 0, <-done, out.String())
	}()
	out.await(t, " active as wordcount-g1 (build ")
	out.await(t, "spice-orch serve: http://")
	url := out.String()
	url = url[strings.Index(url, "spice-orch serve: http://")+len("spice-orch serve: "):]
	url = url[:strings.IndexAny(url, " \n")]

	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(url+"/")))
	require.NoError(t, waitJS(ctx, `!document.getElementById("plugin-dev").hidden &&
		document.getElementById("dev-active").textContent === "wordcount-g1" &&
		document.getElementById("dev-failed").hidden`))
	require.Equal(t, "wordcount", text(t, ctx, "#dev-plugin"))

	// A save that does not build, with markup in the compiler's message.
	bad := src + "\nvar _ = \"<b>inert</b>\" + 1\n"
	line := strconv.Itoa(strings.Count(bad, "\n"))
	writeSource(t, dir, bad)
	out.await(t, "wordcount-c2 failed (build); wordcount-g1 stays active\nmain.go:"+line+": ")
	require.NoError(t, waitJS(ctx, `!document.getElementById("dev-failed").hidden`))
	require.Equal(t, "wordcount-c2 failed (build); wordcount-g1 stays active", text(t, ctx, "#dev-failed-head"))
	require.Equal(t, "main.go:"+line+`: invalid operation: "<b>inert</b>" + 1 (mismatched types untyped string and untyped int)`,
		text(t, ctx, "#dev-diagnostics"))
	require.Equal(t, "wordcount-g1", text(t, ctx, "#dev-active"))
	require.True(t, eval[bool](t, ctx, `document.querySelector("#plugin-dev b") === null`), "the diagnostic is text, not markup")
	// A pair started now launches the last good build.
	require.Contains(t, playCount(t, url), `\"words\":3`)

	// Undoing the mistake builds the active build again: the failure
	// goes, the generation stays.
	writeSource(t, dir, src)
	out.await(t, "wordcount-c3: sha256 ")
	out.await(t, " is the active build; wordcount-g1 stays active")
	require.NoError(t, waitJS(ctx, `document.getElementById("dev-failed").hidden`))
	require.Equal(t, "wordcount-g1", text(t, ctx, "#dev-active"))

	// A change is the next generation.
	changed := strings.Replace(src, "Counts the words and lines of a text.", "Counts words and lines.", 1)
	require.NotEqual(t, src, changed)
	writeSource(t, dir, changed)
	out.await(t, "wordcount-c4: sha256 ")
	out.await(t, " active as wordcount-g2 (build ")
	require.NoError(t, waitJS(ctx, `document.getElementById("dev-active").textContent === "wordcount-g2" &&
		document.getElementById("dev-failed").hidden`))
	require.Contains(t, playCount(t, url), `\"words\":3`)
}

// writeSource saves main.go as editors do: a hidden file renamed over it.
func writeSource(t *testing.T, dir, src string) {
	t.Helper()
	tmp := filepath.Join(dir, ".main.go.tmp")
	require.NoError(t, os.WriteFile(tmp, []byte(src), 0o644))
	require.NoError(t, os.Rename(tmp, filepath.Join(dir, "main.go")))
}
