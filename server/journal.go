package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/store"
)

// The journal makes a 201 durable before the pair's own timeline is: a
// pair waits in the scheduler's queue, in memory, until a slot is free,
// and only then records pair.started. Each accepted pair has a file
// DataDir/accepted/<pair ID>.json, synced before the 201, holding what
// the client sent; it goes once the pair's terminal is in the store. A
// file left by a server that stopped without recording its pair (a crash,
// a forced stop) is settled by the next one's Recover.

// journalEntry is one accepted submission.
type journalEntry struct {
	ContentType string `json:"content_type"`
	Task        string `json:"task,omitempty"`
	Body        []byte `json:"body"`
}

func (s *Server) journalDir() string { return filepath.Join(s.cfg.DataDir, "accepted") }

func (s *Server) journalPath(pairID string) string {
	return filepath.Join(s.journalDir(), pairID+".json")
}

// accept writes the pair's journal file and syncs it and its directory.
func (s *Server) accept(pairID string, je journalEntry) error {
	dir := s.journalDir()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(je)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, ".accept-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.journalPath(pairID)); err != nil {
		return err
	}
	return syncDir(dir)
}

// settle removes the pair's journal file: its terminal is in the store.
func (s *Server) settle(pairID string) { _ = os.Remove(s.journalPath(pairID)) }

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Recover settles the pairs an earlier server on this data directory
// accepted and never recorded: each is recorded in the store as
// cancelled before it started — pair.started, then pair.cancelled — so
// that every accepted pair ends with one terminal there. A pair the store
// already has is left as the store shows it (a pair that was running when
// its process died shows as interrupted, and keeps its file so that it
// can be resumed). Call it after New, before
// serving; it returns how many pairs it recorded.
func (s *Server) Recover(ctx context.Context) (int, error) {
	ents, err := os.ReadDir(s.journalDir())
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	n := 0
	var errs []error
	for _, de := range ents {
		pairID, ok := strings.CutSuffix(de.Name(), ".json")
		if !ok || !de.Type().IsRegular() || id.Check("pair.id", pairID) != nil {
			continue
		}
		recorded, keep, err := s.recover(ctx, pairID)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if recorded {
			n++
		}
		if !keep {
			s.settle(pairID)
		}
	}
	return n, errors.Join(errs...)
}

// recover records an accepted pair the store lacks as cancelled. keep is
// set for a pair the store shows interrupted: its journal stays, so it
// can be built again and resumed.
func (s *Server) recover(ctx context.Context, pairID string) (recorded, keep bool, err error) {
	if rec, err := s.cfg.Store.Pair(ctx, pairID); err == nil {
		return false, rec.Summary.Status == store.StatusInterrupted, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return false, false, err
	}
	je, err := s.readJournal(pairID)
	if err != nil {
		return false, false, err
	}
	ws := filepath.Join(s.cfg.DataDir, "workspaces", pairID)
	if err := os.MkdirAll(ws, 0o700); err != nil {
		return false, false, err
	}
	f, err := newFeed(pairID, s.cfg.StreamLag)
	if err != nil {
		return false, false, err
	}
	defer f.close()
	built, err := s.callBuild(ctx, BuildRequest{PairID: pairID, Workspace: ws, Body: je.Body,
		ContentType: je.ContentType, Task: je.Task, Timeline: f})
	if err != nil {
		return false, false, err
	}
	recordCancelled(built.Config)
	if built.Close != nil {
		built.Close()
	}
	return true, false, nil
}

// readJournal reads one journal file, bounded by what a body may be.
func (s *Server) readJournal(pairID string) (journalEntry, error) {
	fh, err := os.Open(s.journalPath(pairID))
	if err != nil {
		return journalEntry{}, err
	}
	defer fh.Close()
	// Base64 makes a body 4/3 as long; the rest is small.
	b, err := io.ReadAll(io.LimitReader(fh, MaxBodyBytes*2))
	if err != nil {
		return journalEntry{}, err
	}
	return decodeJournal(b)
}

// errJournal is a journal file that is not one this server wrote.
var errJournal = errors.New("server: damaged journal file of an accepted pair")

// decodeJournal reads one journal entry: one of the two body types, a
// body within MaxBodyBytes and a task within a message's bound.
func decodeJournal(b []byte) (journalEntry, error) {
	var je journalEntry
	if err := json.Unmarshal(b, &je); err != nil {
		return journalEntry{}, errors.Join(errJournal, err)
	}
	if (je.ContentType != "application/json" && je.ContentType != "application/yaml") ||
		len(je.Body) > MaxBodyBytes || (je.Task != "" && bound.Text("task", je.Task, bound.MaxMessageBytes) != nil) {
		return journalEntry{}, errJournal
	}
	return je, nil
}
