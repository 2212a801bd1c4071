//go:build unix

package cli

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/providers/openai"
)

// TestS2_BrowserShowsTheSpecWithoutTheKey: the header of a pair shows the
// spec it was submitted with, expandable, with its workers and models,
// and hidden characters escaped. The server's OpenAI key, which a client
// pasted into a system prompt, is in no form (as it is, base64, base64url
// or escaped for JSON) in the pair resource, the list or the page.
func TestS2_BrowserShowsTheSpecWithoutTheKey(t *testing.T) {
	const key = "sk-page-7Hq2<&>Zx9Kd4vW"
	models := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":{"message":"no model here","type":"invalid_request_error"}}`))
	}))
	defer models.Close()
	env := map[string]string{openai.EnvAPIKey: key, openai.EnvBaseURL: models.URL}
	ts := startTestServerEnv(t, func(k string) string { return env[k] }, func(f *serveFlags) { f.allowOpenAI = true }, nil)
	spec := `version: 1
name: keyed
pattern: relay
workers:
  - role: writer
    provider: openai
    model: gpt-page-test
    system: "Use the key ` + key + ` and say pay\u202etxt.exe"
  - role: reviewer
    provider: scripted
    script:
      - text: fine
`
	status, body := post(t, ts.url, "application/yaml", spec)
	require.Equal(t, http.StatusCreated, status, body)
	var created struct{ ID string }
	require.NoError(t, json.Unmarshal([]byte(body), &created))

	jsonForm, err := json.Marshal(key)
	require.NoError(t, err)
	forms := []string{key, base64.StdEncoding.EncodeToString([]byte(key)), base64.URLEncoding.EncodeToString([]byte(key)),
		strings.Trim(string(jsonForm), `"`), "sk-page-7Hq2"}
	noKey := func(where, s string) {
		t.Helper()
		for _, f := range forms {
			require.NotContains(t, s, f, "%s shows the key as %q", where, f)
		}
	}
	status, body = getBody(t, ts.url+"/v1/pairs/"+created.ID)
	require.Equal(t, http.StatusOK, status, body)
	noKey("GET /v1/pairs/{id}", body)
	var v struct {
		Spec struct {
			Workers []struct{ Role, Provider, Model, System string }
		}
	}
	require.NoError(t, json.Unmarshal([]byte(body), &v))
	require.Len(t, v.Spec.Workers, 2)
	require.Equal(t, "gpt-page-test", v.Spec.Workers[0].Model)
	require.Contains(t, v.Spec.Workers[0].System, "[redacted]")
	_, list := getBody(t, ts.url+"/v1/pairs")
	noKey("GET /v1/pairs", list)

	ctx, cancel := newBrowser(t)
	defer cancel()
	require.NoError(t, chromedp.Do(ctx, chromedp.Navigate(ts.url+"/#/pairs/"+created.ID)))
	require.NoError(t, waitJS(ctx, `!document.getElementById('pair-spec-box').hidden && document.body.dataset.streamEnded !== undefined`))
	summary := text(t, ctx, `#pair-spec-summary`)
	require.Contains(t, summary, "writer: openai gpt-page-test")
	require.Contains(t, summary, "reviewer: scripted scripted-1")
	require.NoError(t, chromedp.Do(ctx, chromedp.Click(`#pair-spec-summary`)))
	shown := text(t, ctx, `#pair-spec`)
	require.Contains(t, shown, `"model": "gpt-page-test"`)
	require.Contains(t, shown, `pay\u202etxt.exe`, "the override is shown as an escape")
	require.NotContains(t, shown, "\u202e")
	require.Contains(t, eval[string](t, ctx, `document.querySelector('#lane-head-0 .system-text').textContent`), "[redacted]")
	noKey("the page", eval[string](t, ctx, `document.documentElement.outerHTML + document.body.innerText`))
	shot(t, ctx, "10-spec.png")
}
