//go:build unix

package cli

import (
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"
)

// TestD4_BrowserShowsABannerWhileNATSIsDown: the page of `serve --nats`
// shows "NATS connection lost — reconnecting" as soon as the NATS server
// stops, says why a start is refused meanwhile, and drops the banner
// once the server is back on the same storage and port.
func TestD4_BrowserShowsABannerWhileNATSIsDown(t *testing.T) {
	n := startNATSServe(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx,
		chromedp.Navigate(n.url+"/"),
		chromedp.WaitVisible(`#start`),
	))
	require.NoError(t, waitJS(ctx, `document.body.dataset.backend === "up" && document.getElementById('spec').value.includes('builtin-review')`))
	require.True(t, eval[bool](t, ctx, `document.getElementById('backend-banner').hidden`))

	n.stopNATS()
	require.NoError(t, waitJS(ctx, `!document.getElementById('backend-banner').hidden`))
	require.Equal(t, "NATS connection lost — reconnecting", text(t, ctx, `#backend-banner`))
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#start`)))
	require.NoError(t, waitJS(ctx, `document.getElementById('start-error').textContent.includes('retry later')`))
	shot(t, ctx, "nats-down.png")

	n.startNATS(t)
	require.NoError(t, waitJS(ctx, `document.getElementById('backend-banner').hidden && document.body.dataset.backend === "up"`))
}
