package server

import (
	"net/http"
	"slices"
)

// Bounds of a PluginDevState as the server serves it.
const (
	maxDevDiagnostics     = 50
	maxDevDiagnosticBytes = 1024
)

// PluginDev is a plugin under development whose builds the host activates
// for future pairs (`spice-orch plugin dev --serve`): the page shows its
// active generation and why its last candidate failed.
type PluginDev interface {
	// PluginDevState returns the state now. It must not block.
	PluginDevState() PluginDevState
}

// PluginDevState is what the page shows of a plugin under development.
type PluginDevState struct {
	// Plugin names the plugin (its folder).
	Plugin string `json:"plugin"`
	// Active is the generation future pairs use, and ActiveSHA256 its
	// pin; "" before the first activation.
	Active       string `json:"active"`
	ActiveSHA256 string `json:"active_sha256,omitempty"`
	// Building is the candidate being built now, if any.
	Building string `json:"building,omitempty"`
	// Failed is the last candidate when it failed: Active is still the
	// generation future pairs use. nil once a later one is activated.
	Failed *PluginDevFailure `json:"failed,omitempty"`
}

// PluginDevFailure is a candidate that failed.
type PluginDevFailure struct {
	Candidate string `json:"candidate"`
	// Stage is where it failed: build, verify, conformance or activate.
	Stage string `json:"stage"`
	// Diagnostics are FILE:LINE: message lines, or messages alone.
	Diagnostics []string `json:"diagnostics"`
}

// pluginDev serves GET /v1/plugin-dev: the state of the plugin under
// development, or 204 No Content when the host develops none (the page
// then stops asking, without an error in the browser's console).
func (s *Server) pluginDev(w http.ResponseWriter, r *http.Request) {
	if s.cfg.PluginDev == nil {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	st := s.cfg.PluginDev.PluginDevState()
	if f := st.Failed; f != nil {
		// The host's diagnostics are a compiler's output: bounded here too.
		c := *f
		c.Diagnostics = slices.Clone(c.Diagnostics[:min(len(c.Diagnostics), maxDevDiagnostics)])
		for i, d := range c.Diagnostics {
			if len(d) > maxDevDiagnosticBytes {
				c.Diagnostics[i] = d[:maxDevDiagnosticBytes] + "…"
			}
		}
		st.Failed = &c
	}
	writeJSON(w, http.StatusOK, st)
}
