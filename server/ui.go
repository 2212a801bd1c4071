package server

import (
	"bytes"
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strconv"
)

// The web UI: plain HTML, CSS and JavaScript, embedded, so the server
// needs nothing at run time (no CDN, no build step, works offline).
//
//go:embed ui
var uiFS embed.FS

//go:embed openapi.json
var openAPIDoc []byte

var assetTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
	".svg": "image/svg+xml",
}

func serveFile(w http.ResponseWriter, name, ctype string) {
	b, err := fs.ReadFile(uiFS, "ui/"+name)
	if err != nil {
		http.NotFound(w, nil)
		return
	}
	w.Header().Set("Content-Type", ctype)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// index serves the page: one document, the rest is app.js.
func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	serveFile(w, "index.html", "text/html; charset=utf-8")
}

// loginPage serves the login form; after a refused token (the redirect
// of login carries failed=1) it says so, and after a logout that the
// session ended. The page has no script: the server shows the message.
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	b, err := fs.ReadFile(uiFS, "ui/login.html")
	if err != nil {
		http.NotFound(w, r)
		return
	}
	q := r.URL.Query()
	switch {
	case q.Has("failed"):
		b = bytes.Replace(b, []byte(`<p id="login-error" class="error" role="alert" hidden>`), []byte(`<p id="login-error" class="error" role="alert">`), 1)
	case q.Has("out"):
		b = bytes.Replace(b, []byte(`<p id="login-out" class="notice" hidden>`), []byte(`<p id="login-out" class="notice">`), 1)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// favicon serves GET /favicon.ico, which browsers ask for on every load:
// the page's icon, an SVG.
func (s *Server) favicon(w http.ResponseWriter, r *http.Request) {
	serveFile(w, "favicon.svg", "image/svg+xml")
}

// asset serves GET /assets/{file}: only the files the UI ships.
func (s *Server) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	ctype, ok := assetTypes[path.Ext(name)]
	if !ok || name != path.Base(name) {
		http.NotFound(w, r)
		return
	}
	serveFile(w, name, ctype)
}

// openAPI serves GET /v1/openapi.json.
func (s *Server) openAPI(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPIDoc)))
	_, _ = w.Write(openAPIDoc)
}
