package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The store records a pair's timeline, not what it was submitted with: the
// name of its spec, its task (given with ?task= or the spec's) and its
// workers' system prompts. The server keeps them
// beside the workspaces, one small file per pair, DataDir/meta/<pair
// ID>.json, so that the pair resource and the list can show and search them.

// metaMax bounds a meta file read back: a task is at most a message's
// bound, a name a spec field.
const metaMax = 1 << 20

type pairMeta struct {
	Name string `json:"name,omitempty"`
	Task string `json:"task,omitempty"`
	// Systems maps each worker's role to its system prompt.
	Systems map[string]string `json:"systems,omitempty"`
	// Unpinned are the tools whose code is not pinned (Built.Unpinned).
	Unpinned []string `json:"unpinned_tools,omitempty"`
	// Spec is the spec as Built.Spec showed it.
	Spec json.RawMessage `json:"spec,omitempty"`
}

// redact applies the host's Built.Redact to what m shows. A spec that is
// not JSON after it is dropped, and so is everything should redact panic:
// what cannot be checked is not shown.
func (m *pairMeta) redact(f func(string) string) {
	if f == nil {
		return
	}
	defer func() {
		if recover() != nil {
			*m = pairMeta{}
		}
	}()
	m.Name, m.Task = f(m.Name), f(m.Task)
	for role, sys := range m.Systems {
		m.Systems[role] = f(sys)
	}
	if len(m.Spec) > 0 {
		if b := []byte(f(string(m.Spec))); json.Valid(b) {
			m.Spec = b
		} else {
			m.Spec = nil
		}
	}
}

func (s *Server) metaPath(pairID string) string {
	return filepath.Join(s.cfg.DataDir, "meta", pairID+".json")
}

// writeMeta records m; a failure only loses what the page shows.
func (s *Server) writeMeta(pairID string, m pairMeta) {
	if m.Name == "" && m.Task == "" && len(m.Systems) == 0 && len(m.Unpinned) == 0 && len(m.Spec) == 0 {
		return
	}
	b, err := json.Marshal(m)
	if err != nil {
		return
	}
	if err := os.MkdirAll(filepath.Dir(s.metaPath(pairID)), 0o700); err != nil {
		return
	}
	_ = os.WriteFile(s.metaPath(pairID), b, 0o600)
}

// readMeta returns what writeMeta recorded, or nothing.
func (s *Server) readMeta(pairID string) pairMeta {
	var m pairMeta
	f, err := os.Open(s.metaPath(pairID))
	if err != nil {
		return m
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() > metaMax {
		return m
	}
	_ = json.NewDecoder(f).Decode(&m)
	return m
}

// pruneWorkspaces removes the workspaces of ended pairs beyond
// KeepWorkspaces (newest kept) and older than KeepWorkspaceAge. A live
// pair's workspace is never removed; ended names the pair that just ended.
func (s *Server) pruneWorkspaces(ended string) {
	if s.cfg.KeepWorkspaces == 0 && s.cfg.KeepWorkspaceAge == 0 {
		return
	}
	dir := filepath.Join(s.cfg.DataDir, "workspaces")
	des, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	type ws struct {
		name string
		mod  time.Time
	}
	var old []ws
	s.mu.Lock()
	for _, de := range des {
		if !de.IsDir() || strings.HasPrefix(de.Name(), ".") {
			continue
		}
		if e := s.pairs[de.Name()]; e != nil && de.Name() != ended && !isClosed(e.ended) {
			continue
		}
		info, err := de.Info()
		if err != nil {
			continue
		}
		old = append(old, ws{de.Name(), info.ModTime()})
	}
	s.mu.Unlock()
	slices.SortFunc(old, func(a, b ws) int { return b.mod.Compare(a.mod) })
	now := s.cfg.Clock()
	for i, w := range old {
		aged := s.cfg.KeepWorkspaceAge > 0 && now.Sub(w.mod) > s.cfg.KeepWorkspaceAge
		over := s.cfg.KeepWorkspaces > 0 && i >= s.cfg.KeepWorkspaces
		if aged || over {
			_ = os.RemoveAll(filepath.Join(dir, w.name))
		}
	}
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
