//go:build unix

package cli

import (
	"fmt"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/serve"
)

// inputsSpec is a relay whose writer writes a file with hostile content
// and answers with hostile text, which the reviewer gets in its handoff.
const inputsSpec = `version: 1
name: inputs
pattern: relay
approve: never
workers:
  - role: writer
    provider: scripted
    system: %q
    script:
      - calls: [{name: fs.write, arguments: {path: out.txt, content: %q}}]
      - text: %q
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`

// escaped is hostileText as the page shows it.
const escaped = `<b>bold</b><img src=x onerror="window.__xss=1"> invoice\u202etxt.exe \u2067iso\u2069 zero\u200bwidth \x1b[31mred\x1b[0m`

// TestS2_BrowserShowsToolArgumentsAndHandoffMessages: a tool card shows its
// call's arguments, taken from the model operation's recorded output; a
// handoff expands to its message, rebuilt from the recorded answer and
// checked against the recorded SHA-256; hostile text in both stays inert
// and visible; a lane shows its worker's system prompt. The built-in pair, whose task is the spec's, verifies too.
func TestS2_BrowserShowsToolArgumentsAndHandoffMessages(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	id := submit(t, ts.url, fmt.Sprintf(inputsSpec, "be brief "+hostileText, hostileText, "done: "+hostileText), "task "+hostileText)
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && !!document.querySelector('#timeline .tool .tool-args') && !!document.querySelector('#timeline .handoff-details[data-verified]')`))
	args := eval[string](t, ctx, `document.querySelector('#timeline .tool .tool-args').textContent`)
	require.Contains(t, args, `"path": "out.txt"`)
	// JSON escapes the quotes and the escape character; the page shows
	// the other hidden characters as escapes.
	require.Contains(t, args, `"content": "<b>bold</b><img src=x onerror=\"window.__xss=1\"> invoice\u202etxt.exe \u2067iso\u2069 zero\u200bwidth \u001b[31mred\u001b[0m"`)

	require.False(t, eval[bool](t, ctx, `document.querySelector('#timeline .handoff-details').open`), "a message starts folded")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#timeline .handoff-details summary`)))
	require.True(t, eval[bool](t, ctx, `document.querySelector('#timeline .handoff-details').open`))
	msg := eval[string](t, ctx, `document.querySelector('#timeline .handoff-details .handoff-message').textContent`)
	require.Equal(t, "Task:\ntask "+escaped+"\n\nAnswer from writer:\ndone: "+escaped, msg)
	require.Contains(t, text(t, ctx, `#timeline .handoff-details summary`), "sha256 verified")
	require.Zero(t, eval[int](t, ctx, `document.querySelectorAll('#pair b, #pair img').length`))
	require.False(t, eval[bool](t, ctx, `window.__xss !== undefined`), "hostile text ran as code")
	page := eval[string](t, ctx, `document.body.textContent`)
	for _, r := range "\u202e\u2067\u2069\u200b\x1b" {
		require.NotContains(t, page, string(r), "U+%04X on the page", r)
	}
	// The writer's lane shows its system prompt, folded.
	require.True(t, eval[bool](t, ctx, `!document.querySelector('#lane-head-0 .system').hidden`))
	require.Equal(t, "be brief "+escaped, eval[string](t, ctx, `document.querySelector("#lane-head-0 .system-text").textContent`))
	require.True(t, eval[bool](t, ctx, `document.querySelector('#lane-head-1 .system').hidden`), "the reviewer has no system prompt")
	shot(t, ctx, "8-inputs.png")

	id = submit(t, ts.url, serve.BuiltinYAML(), "")
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.body.dataset.streamEnded !== undefined && document.querySelectorAll('#timeline .handoff').length > 0 && document.querySelectorAll('#timeline .handoff-details[data-verified]').length === document.querySelectorAll('#timeline .handoff').length`))
}
