package server

import (
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

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	serveFile(w, "login.html", "text/html; charset=utf-8")
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
