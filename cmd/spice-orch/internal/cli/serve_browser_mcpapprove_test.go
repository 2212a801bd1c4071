//go:build unix

package cli

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/server"
	"github.com/spice-orch/spice-orch/toolgen"
)

// TestM5_BrowserApprovesAServerCandidate: under serve --mcp a candidate
// generation whose definitions changed is shown on the page as the
// server's question (the server, what changed, the digest, nothing of the
// spec's env or path); Deny keeps the old generation, and Approve on the
// next candidate makes its tools reach the pairs built after it.
func TestM5_BrowserApprovesAServerCandidate(t *testing.T) {
	ms := startMCPServer(t, "mutating")
	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ms.url+"/")))
	require.NoError(t, waitJS(ctx, `document.body.dataset.serverQuestions === '0'`))
	require.True(t, eval[bool](t, ctx, `document.getElementById('server-questions').hidden`), "no question, no panel")

	// Denied from the page: the candidate stays inactive.
	ms.playPair(t, callsSpec("grow", "{}"))
	q := ms.question(t)
	node := serverQuestionOnPage(t, ctx, q)
	shot(t, ctx, "m5-server-question.png")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(node+` .deny`)))
	failed := ms.next(t, toolgen.EventCandidateFailed)
	require.Contains(t, failed.Reason, "not approved")
	requireNoServerQuestion(t, ctx, ms)
	status, body := post(t, ms.url, "application/yaml", callsSpec("extra", "{}"))
	require.Equal(t, http.StatusBadRequest, status, "a denied candidate stays inactive: %s", body)

	// Approved from the page: new pairs get the new tools.
	ms.playPair(t, callsSpec("grow", "{}"))
	q = ms.question(t)
	node = serverQuestionOnPage(t, ctx, q)
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(node+` .approve`)))
	ms.next(t, toolgen.EventActivated)
	requireNoServerQuestion(t, ctx, ms)
	got := ms.playPair(t, callsSpec("extra", "{}"))
	require.Contains(t, got, `"name":"extra"`)
	require.Equal(t, 1, strings.Count(got, `"kind":"tool.completed"`))
}

// serverQuestionOnPage waits for q in the page's panel of the server's
// questions, checks what it shows and returns its selector.
func serverQuestionOnPage(t *testing.T, ctx context.Context, q orchestrator.Approval) string {
	t.Helper()
	require.Equal(t, server.OwnQuestions, q.Pair)
	node := `#server-questions .question[data-question="` + string(q.Question) + `"]`
	require.NoError(t, waitJS(ctx, `!!document.querySelector('`+node+` .approve') && !document.getElementById('server-questions').hidden`))
	shown := text(t, ctx, node)
	for _, want := range []string{"fixture", "tools_changed", "pinned", "added: extra", "digest " + q.Digest[:12]} {
		require.Contains(t, shown, want)
	}
	page := eval[string](t, ctx, `document.body.textContent`)
	require.NotContains(t, page, envMCPServe, "the spec's env is not shown")
	return node
}

// requireNoServerQuestion checks through the API that no question of the
// server is pending, and waits for the page to drop its panel.
func requireNoServerQuestion(t *testing.T, ctx context.Context, ms *mcpServer) {
	t.Helper()
	status, body := httpDo(t, "GET", ms.url+"/v1/pairs/"+server.OwnQuestions+"/approvals", "", "")
	require.Equal(t, http.StatusOK, status, body)
	require.JSONEq(t, `{"approvals":[]}`, body)
	require.NoError(t, waitJS(ctx, `document.getElementById('server-questions').hidden && document.body.dataset.serverQuestions === '0'`))
}

// TestM5_BrowserWithoutMCPDoesNotPollServerQuestions: a serve without
// --mcp never asks a question of its own, so the page asks for them
// once, is told 204, and asks no more while it goes on refreshing the
// list of pairs (every two seconds) for four periods of its one-second
// poll.
func TestM5_BrowserWithoutMCPDoesNotPollServerQuestions(t *testing.T) {
	ts := startTestServer(t)
	ctx, cancel := newBrowser(t)
	defer cancel()
	asked := make(chan int64, 64) // the status of each answer to the page's question
	listed := make(chan struct{}, 64)
	require.NoError(t, chromedp.Listen(ctx, func(ev any) {
		e, ok := ev.(*network.EventResponseReceived)
		if !ok {
			return
		}
		u, err := url.Parse(e.Response.URL)
		if err != nil {
			return
		}
		// The listener must not block the browser's connection: the
		// channels have room for far more than the test waits for.
		switch u.Path {
		case "/v1/pairs/" + server.OwnQuestions + "/approvals":
			select {
			case asked <- e.Response.Status:
			default:
			}
		case "/v1/pairs":
			select {
			case listed <- struct{}{}:
			default:
			}
		}
	}))
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/")))

	recv := func(what string, c <-chan struct{}) {
		t.Helper()
		select {
		case <-c:
		case <-ctx.Done():
			t.Fatalf("the page did not %s before the browser's deadline", what)
		}
	}
	var first int64
	select {
	case first = <-asked:
	case <-ctx.Done():
		t.Fatal("the page never asked for the server's questions")
	}
	for range 3 {
		recv("refresh the list of pairs", listed)
	}
	require.Zero(t, len(asked), "the page asked for the server's questions again")
	require.EqualValues(t, http.StatusNoContent, first)
	require.True(t, eval[bool](t, ctx, `document.getElementById('server-questions').hidden`))
}
