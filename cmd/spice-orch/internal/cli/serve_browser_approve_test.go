//go:build unix

package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// approveSpec is a relay whose writer writes out.txt once, asking first:
// its content carries a right-to-left override and a zero-width space.
const approveSpec = `version: 1
pattern: relay
approve: mutating
workers:
  - role: writer
    provider: scripted
    script:
      - calls: [{name: fs.write, arguments: {path: out.txt, content: "<b>x</b> pay\u202etxt.exe zero\u200bwidth"}}]
      - text: written
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`

// startPending posts approveSpec and returns the pair's ID and the path
// its tool would write.
func startPending(t *testing.T, ts *testServer) (string, string) {
	t.Helper()
	status, body := post(t, ts.url, "application/yaml", approveSpec)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))
	return created.ID, filepath.Join(ts.dir, "data", "workspaces", created.ID, "out.txt")
}

// TestR1_BrowserApprovesAndDeniesAPendingCall: a pair whose fs.write waits
// shows the question on the writer's lane (tool, effect, replay class,
// arguments as inert text with hidden characters escaped); Approve lets the
// tool run and write its file. In a second pair Deny shows approval_denied
// and nothing is written.
func TestR1_BrowserApprovesAndDeniesAPendingCall(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()

	id, out := startPending(t, ts)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `!!document.querySelector('#lane-head-0 .question .approve')`))
	require.Equal(t, "writer", text(t, ctx, `#lane-head-0 .lane-name`))
	q := text(t, ctx, `#lane-head-0 .question`)
	for _, want := range []string{"fs.write", "mutating", "replay idempotent", `"path": "out.txt"`, `<b>x</b> pay\u202etxt.exe zero\u200bwidth`} {
		require.Contains(t, q, want)
	}
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#pair b').length`), "the arguments were parsed as HTML")
	for _, r := range "\u202e\u200b" {
		require.NotContains(t, eval[string](t, ctx, `document.body.textContent`), string(r), "U+%04X on the page", r)
	}
	shot(t, ctx, "7-approval.png")
	require.NoFileExists(t, out, "the tool ran before its answer")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#lane-head-0 .question .approve`)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('pair-state').textContent === 'completed'`))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, "<b>x</b> pay\u202etxt.exe zero\u200bwidth", string(b))
	require.NoError(t, waitJS(ctx, `document.querySelectorAll('#timeline .tool.tool-completed').length === 1 && document.querySelector('#lane-head-0 .pending-question').hidden`))

	id, out = startPending(t, ts)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `!!document.querySelector('#lane-head-0 .question .deny')`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#lane-head-0 .question .deny`)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.getElementById('timeline').textContent.includes('approval_denied')`))
	require.NoFileExists(t, out, "a denied call ran")
	require.True(t, eval[bool](t, ctx, `document.querySelector('#timeline .tool').textContent.includes('approval_denied')`), "the tool card shows the denial")
}
