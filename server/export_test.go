package server

import "strings"

// APIRoutes returns "METHOD /path" for every route of the API, for the
// test that holds the OpenAPI document to the routes.
func APIRoutes() []string {
	var s Server
	var out []string
	for _, r := range s.table() {
		if r.api {
			// A trailing {name...} matches the rest of the path, slashes
			// included; OpenAPI writes it {name}.
			out = append(out, r.method+" "+strings.ReplaceAll(r.path, "...}", "}"))
		}
	}
	return out
}

// Retained returns the finished pairs the server keeps in memory and the
// bytes their feeds hold.
func (s *Server) Retained() (pairs int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.finished), s.finishedBytes
}

// OnStreamReleased sets a function told each time one of s's streams
// gives its slot back.
func (s *Server) OnStreamReleased(f func()) { s.released.Store(&f) }
