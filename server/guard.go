package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"
)

// sessionCookie is the cookie the login page sets when a token is
// configured. Its value is derived from the token, never the token.
const sessionCookie = "spice_orch_session"

func sessionValue(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("spice-orch session v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// guard applies what every request goes through: the Host check, the
// security headers and, with a token, authentication.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
		h.Set("Cache-Control", "no-store")
		rc := http.NewResponseController(w)
		if r.ContentLength != 0 {
			// A body is read under a deadline; a stream's request has none
			// and keeps none, as net/http's background read would end the
			// stream at it.
			_ = rc.SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
		}
		if !s.hostAllowed(r.Host) {
			refuse(w, rc)
			fail(w, http.StatusForbidden, codeHost, "the Host header names neither a loopback address nor an allowed host")
			return
		}
		if s.cfg.Token != "" && !s.authorized(r) {
			switch {
			case r.URL.Path == "/login" || r.URL.Path == "/favicon.ico" || strings.HasPrefix(r.URL.Path, "/assets/"):
			case strings.HasPrefix(r.URL.Path, "/v1/") || r.URL.Path == "/metrics":
				refuse(w, rc)
				h.Set("WWW-Authenticate", `Bearer realm="spice-orch"`)
				fail(w, http.StatusUnauthorized, codeUnauthorized, "a bearer token is required")
				return
			default:
				http.Redirect(w, r, "/login", http.StatusSeeOther)
				return
			}
		} else if r.URL.Path != "/login" {
			prove(r)
		}
		next.ServeHTTP(w, r)
	})
}

// refuse makes a refusal the connection's last answer, given without
// reading a body the client may never send: net/http would otherwise read
// it, before the answer to keep the connection, or after it at close.
func refuse(w http.ResponseWriter, rc *http.ResponseController) {
	w.Header().Set("Connection", "close")
	_ = rc.SetReadDeadline(time.Now())
}

// authorized reports whether r carries the token or the session cookie.
func (s *Server) authorized(r *http.Request) bool {
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return subtle.ConstantTimeCompare([]byte(v), []byte(s.cfg.Token)) == 1
	}
	if c, err := r.Cookie(sessionCookie); err == nil {
		return subtle.ConstantTimeCompare([]byte(c.Value), []byte(s.session)) == 1
	}
	return false
}

// hostAllowed is the DNS-rebinding check: a page on another name that
// resolves to 127.0.0.1 sends its own name as Host, which is refused.
func (s *Server) hostAllowed(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if isLoopback(host) {
		return true
	}
	for _, h := range s.cfg.Hosts {
		if strings.EqualFold(h, host) {
			return true
		}
	}
	return s.cfg.Token != "" && len(s.cfg.Hosts) == 0
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// ErrNotLoopback is CheckListen's refusal.
var ErrNotLoopback = errors.New("server: refusing to listen on a non-loopback address without a token (set --token or SPICE_ORCH_TOKEN)")

// CheckListen reports whether a server may listen on addr (host:port):
// without a token only on a loopback address or localhost.
func CheckListen(addr string, token bool) error {
	if token {
		return nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if !isLoopback(strings.ToLower(host)) {
		return ErrNotLoopback
	}
	return nil
}

// login serves POST /login: a form with the token sets the session cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil {
		fail(w, http.StatusBadRequest, codeBadRequest, "a login form of at most 4 KiB")
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(s.cfg.Token)) != 1 {
		http.Redirect(w, r, "/login?failed=1", http.StatusSeeOther)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: s.session, Path: "/",
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// logout serves POST /logout: the session cookie is cleared, and the
// browser goes back to the login page (or the page, without a token).
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	})
	if s.cfg.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	http.Redirect(w, r, "/login?out=1", http.StatusSeeOther)
}
