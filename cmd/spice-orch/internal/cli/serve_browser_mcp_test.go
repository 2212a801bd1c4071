//go:build unix

package cli

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// The tool card of a call to a streamable-HTTP MCP server's tool is
// marked unpinned on the page, and the pair's view lists the tool.
func TestM1_PageMarksTheToolsOfAnUnpinnedServer(t *testing.T) {
	ms := startMCPServerWith(t, "never", echoSpec(httpMCPServer(t)))
	id, timeline := ms.play(t, callsSpec("echo", `{text: from afar}`))
	require.Contains(t, timeline, `"kind":"tool.completed"`)
	status, body := httpDo(t, "GET", ms.url+"/v1/pairs/"+id, "", "")
	require.Equal(t, http.StatusOK, status, body)
	require.Contains(t, body, `"unpinned_tools":["echo","grow"]`)
	shown, errShow, code := call(t, nil, "runs", "show", "--store", ms.db, id)
	require.Equal(t, 0, code, errShow)
	require.Contains(t, shown, "server remote  UNPINNED")
	require.Regexp(t, `plan\.leased\s+plan-`+id+`-1`, shown)

	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ms.url+"/#/pairs/"+id)))
	require.NoError(t, waitJS(ctx, `document.querySelector("details.tool .unpinned-badge") !== null`))
	require.Equal(t, "echo", eval[string](t, ctx, `document.querySelector("details.tool .unpinned-badge").previousElementSibling.textContent`))
	require.Equal(t, "unpinned", eval[string](t, ctx, `document.querySelector("details.tool .unpinned-badge").textContent`))
	shot(t, ctx, "mcp-unpinned.png")
}
