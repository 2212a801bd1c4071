package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/server"
)

const secret = "s3cret-token-value"

// TestS2_TokenAuth: with a token every API call needs it (or the session
// cookie of the login page), the page redirects to the login, and no
// response ever holds the token.
func TestS2_TokenAuth(t *testing.T) {
	h := newHarness(t, options{token: secret})
	var bodies []string
	check := func(r response, status int) {
		t.Helper()
		require.Equal(t, status, r.status, string(r.body))
		bodies = append(bodies, string(r.body))
		for _, v := range r.header {
			bodies = append(bodies, strings.Join(v, " "))
		}
	}
	r := h.do("GET", "/v1/pairs", "", "")
	check(r, http.StatusUnauthorized)
	require.Contains(t, r.header.Get("WWW-Authenticate"), "Bearer")
	check(h.do("GET", "/v1/pairs", "", "", "Authorization", "Bearer wrong"), http.StatusUnauthorized)
	check(h.do("GET", "/v1/pairs", "", "", "Authorization", "Bearer "+secret), http.StatusOK)
	check(h.do("POST", "/v1/pairs", "application/json", `{"first":["a"],"second":["b"]}`), http.StatusUnauthorized)
	r = h.do("POST", "/v1/pairs", "application/json", `{"first":["a"],"second":["b"]}`, "Authorization", "Bearer "+secret)
	check(r, http.StatusCreated)

	// The page: a redirect to the login, whose form sets the cookie.
	noFollow := *h.http.Client()
	noFollow.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := noFollow.Get(h.url("/"))
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	require.Equal(t, "/login", resp.Header.Get("Location"))
	resp, err = noFollow.PostForm(h.url("/login"), url.Values{"token": {"wrong"}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Empty(t, resp.Cookies())
	resp, err = noFollow.PostForm(h.url("/login"), url.Values{"token": {secret}})
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusSeeOther, resp.StatusCode)
	cookies := resp.Cookies()
	require.Len(t, cookies, 1)
	require.True(t, cookies[0].HttpOnly)
	require.Equal(t, http.SameSiteStrictMode, cookies[0].SameSite)
	require.NotContains(t, cookies[0].Value, secret)
	req, _ := http.NewRequest("GET", h.url("/v1/pairs"), nil)
	req.AddCookie(cookies[0])
	resp, err = noFollow.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)

	// With a token, any Host is fine (a rebinding page has no token).
	check(h.do("GET", "/v1/pairs", "", "", "Authorization", "Bearer "+secret, "Host", "spice.example.com"), http.StatusOK)
	for _, b := range bodies {
		require.NotContains(t, b, secret)
	}
}

// TestS2_DNSRebindingIsRefused: without a token, a Host that is not a
// loopback name is refused, on every route.
func TestS2_DNSRebindingIsRefused(t *testing.T) {
	h := newHarness(t, options{})
	for _, host := range []string{"attacker.example", "attacker.example:80", "127.0.0.1.nip.io", "localhost.attacker.example"} {
		for _, p := range []string{"/", "/v1/pairs", "/v1/openapi.json"} {
			r := h.do("GET", p, "", "", "Host", host)
			require.Equal(t, http.StatusForbidden, r.status, host+p)
			require.Contains(t, string(r.body), `"code":"host_refused"`)
		}
	}
	for _, host := range []string{"localhost", "localhost:7070", "127.0.0.1:7070", "[::1]:7070", "LOCALHOST"} {
		require.Equal(t, http.StatusOK, h.do("GET", "/v1/pairs", "", "", "Host", host).status, host)
	}
	// An operator may allow more names.
	h2 := newHarness(t, options{mutate: func(c *server.Config) { c.Hosts = []string{"orch.internal"} }})
	require.Equal(t, http.StatusOK, h2.do("GET", "/v1/pairs", "", "", "Host", "orch.internal:7070").status)
}

// TestS2_CrossSiteStateChangesAreRefused: a page on another site can
// neither start nor cancel a pair.
func TestS2_CrossSiteStateChangesAreRefused(t *testing.T) {
	h := newHarness(t, options{})
	body := `{"first":["a"],"second":["b"]}`
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://attacker.example"},
	} {
		r := h.do("POST", "/v1/pairs", "application/json", body, hdr...)
		require.Equal(t, http.StatusForbidden, r.status, hdr)
		r = h.do("POST", "/v1/pairs/pair-x/cancel", "", "", hdr...)
		require.Equal(t, http.StatusForbidden, r.status, hdr)
	}
	// What a cross-site form could send is refused by its type.
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		require.Equal(t, http.StatusUnsupportedMediaType, h.do("POST", "/v1/pairs", ct, body).status, ct)
	}
	// The same origin may.
	r := h.do("POST", "/v1/pairs", "application/json", body, "Sec-Fetch-Site", "same-origin")
	require.Equal(t, http.StatusCreated, r.status, string(r.body))
}

func TestS2_ListenOnlyOnLoopbackWithoutAToken(t *testing.T) {
	for _, a := range []string{"127.0.0.1:7070", "localhost:0", "[::1]:7070", "127.0.0.2:1"} {
		require.NoError(t, server.CheckListen(a, false), a)
	}
	for _, a := range []string{":7070", "0.0.0.0:7070", "[::]:7070", "192.168.1.2:7070", "example.com:80"} {
		require.ErrorIs(t, server.CheckListen(a, false), server.ErrNotLoopback, a)
		require.NoError(t, server.CheckListen(a, true), a)
	}
}

// TestR1_AnswersPassTheStateChangeChecks: answering an approval question
// is a state change like any other: it needs the token, comes from the
// same origin, names an allowed Host, and is JSON (which a cross-site
// form cannot send without a preflight). Each refusal comes before the
// broker is asked, so it answers nothing.
func TestR1_AnswersPassTheStateChangeChecks(t *testing.T) {
	const path = "/v1/pairs/pair-x/approvals/pair-x/writer/ix-1"
	body := `{"answer":"approve","digest":"` + strings.Repeat("a", 64) + `"}`
	h := newHarness(t, options{token: secret, mutate: func(c *server.Config) { c.Hosts = []string{"orch.internal"} }})
	bearer := []string{"Authorization", "Bearer " + secret}
	r := h.do("POST", path, "application/json", body)
	require.Equal(t, http.StatusUnauthorized, r.status, string(r.body))
	r = h.do("GET", "/v1/pairs/pair-x/approvals", "", "")
	require.Equal(t, http.StatusUnauthorized, r.status, string(r.body))
	for _, hdr := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "http://attacker.example"},
	} {
		r = h.do("POST", path, "application/json", body, append(hdr, bearer...)...)
		require.Equal(t, http.StatusForbidden, r.status, hdr)
		require.Contains(t, string(r.body), `"code":"forbidden"`)
	}
	r = h.do("POST", path, "application/json", body, append([]string{"Host", "attacker.example"}, bearer...)...)
	require.Equal(t, http.StatusForbidden, r.status)
	require.Contains(t, string(r.body), `"code":"host_refused"`)
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"} {
		require.Equal(t, http.StatusUnsupportedMediaType, h.do("POST", path, ct, body, bearer...).status, ct)
	}
	// Past every check, a question nobody asked is a 404.
	r = h.do("POST", path, "application/json", body, append([]string{"Sec-Fetch-Site", "same-origin"}, bearer...)...)
	require.Equal(t, http.StatusNotFound, r.status, string(r.body))
	require.Contains(t, string(r.body), `"code":"unknown_question"`)
}
