package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/spice-orch/spice-orch/idempotency"
	"github.com/spice-orch/spice-orch/kernel/problem"
)

// CodeIdempotencyConflict is the problem code of a definitive failure: a
// call came with the idempotency key of an earlier write but with other
// arguments. Nothing was changed.
const CodeIdempotencyConflict = "idempotency_conflict"

var problemKeyConflict = problem.Must(CodeIdempotencyConflict,
	"this call's idempotency key belongs to an earlier write with other arguments; nothing was changed")

// MaxRememberedKeys bounds the keys fs.write remembers without a journal.
const MaxRememberedKeys = 4096

// maxJournalEntry bounds what fs.write reads of one journal entry: the
// arguments' digest, a newline and a result, which is a short JSON object.
const maxJournalEntry = 4 << 10

// writeKeys is what fs.write knows of the writes it made, by idempotency
// key: the digest of the call's arguments and the result it returned. A
// call whose key is known is not written again: it gets the same result
// (R5). With a journal directory the knowledge outlives the process, one
// small file per key; without one it lives in memory, bounded.
type writeKeys struct {
	dir   string         // the journal; "" keeps keys in memory
	locks [16]sync.Mutex // by the key's first hex digit: one write per key at a time
	mu    sync.Mutex     // guards mem and order
	mem   map[idempotency.Key]string
	order []idempotency.Key // mem's keys, oldest first
}

// lock holds k's stripe until the returned function is called.
func (w *writeKeys) lock(k idempotency.Key) func() {
	m := &w.locks[strings.IndexByte("0123456789abcdef", k[0])&15]
	m.Lock()
	return m.Unlock
}

// entry is a journal entry's text: the arguments' digest, a newline and
// the result.
func entry(args, result string) string {
	sum := sha256.Sum256([]byte(args))
	return hex.EncodeToString(sum[:]) + "\n" + result
}

// done returns the result of the earlier write with key k, if there was
// one. conflict says the key was used with other arguments.
func (w *writeKeys) done(k idempotency.Key, args string) (result string, found, conflict bool) {
	var e string
	if w.dir == "" {
		w.mu.Lock()
		e, found = w.mem[k]
		w.mu.Unlock()
	} else {
		e, found = w.read(k)
	}
	if !found {
		return "", false, false
	}
	digest, result, ok := strings.Cut(e, "\n")
	if !ok {
		return "", false, false // a torn entry: as if none
	}
	sum := sha256.Sum256([]byte(args))
	if digest != hex.EncodeToString(sum[:]) {
		return "", true, true
	}
	return result, true, false
}

func (w *writeKeys) read(k idempotency.Key) (string, bool) {
	f, err := os.Open(filepath.Join(w.dir, string(k)))
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxJournalEntry+1))
	if err != nil || len(b) > maxJournalEntry {
		return "", false
	}
	return string(b), true
}

// record remembers that the write with key k returned result. A journal
// entry is written to a temporary file and renamed into place, so a reader
// sees all of it or none; an entry lost to a crash only means that a
// repeat writes the same content again.
func (w *writeKeys) record(k idempotency.Key, args, result string) error {
	e := entry(args, result)
	if w.dir == "" {
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, ok := w.mem[k]; !ok {
			if len(w.order) == MaxRememberedKeys {
				delete(w.mem, w.order[0])
				w.order = append(w.order[:0], w.order[1:]...)
			}
			w.order = append(w.order, k)
		}
		if w.mem == nil {
			w.mem = make(map[idempotency.Key]string)
		}
		w.mem[k] = e
		return nil
	}
	tmp := filepath.Join(w.dir, TempPrefix+randomHex()+".tmp")
	if err := os.WriteFile(tmp, []byte(e), 0o600); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(w.dir, string(k))); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// openJournal checks that dir is an existing directory.
func openJournal(dir string) (string, error) {
	if dir == "" {
		return "", nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(abs)
	if err == nil && !fi.IsDir() {
		err = &fs.PathError{Op: "open", Path: dir, Err: errors.New("not a directory")}
	}
	return abs, err
}
