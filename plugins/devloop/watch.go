package devloop

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/fsnotify/fsnotify"
)

// Bounds of the watched tree.
const (
	maxSourceFiles = 10000
	maxSourceBytes = 256 << 20
)

// ignored reports whether a name is no source: hidden files and folders
// (an editor's temporary file, .git) and backups.
func ignored(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasSuffix(name, "~") || strings.HasSuffix(name, ".swp")
}

// skipDir reports whether the walk of dir leaves path out.
func (l *Loop) skipDir(path string) bool {
	return path != l.cfg.Dir && (ignored(filepath.Base(path)) || path == l.cfg.Out)
}

// watchTree adds a watch on every folder of the source tree under root.
func (l *Loop) watchTree(w *fsnotify.Watcher, root string) error {
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if l.skipDir(path) {
			return filepath.SkipDir
		}
		return w.Add(path)
	})
}

// relevant reports whether an event is a change of the source.
func (l *Loop) relevant(ev fsnotify.Event) bool {
	if ev.Op == fsnotify.Chmod {
		return false
	}
	rel, err := filepath.Rel(l.cfg.Dir, ev.Name)
	if err != nil || strings.HasPrefix(rel, "..") {
		return false
	}
	if ev.Name == l.cfg.Out || strings.HasPrefix(ev.Name, l.cfg.Out+string(filepath.Separator)) {
		return false
	}
	for _, part := range strings.Split(rel, string(filepath.Separator)) {
		if ignored(part) {
			return false
		}
	}
	return true
}

// sourceDigest is a SHA-256 over the names and contents of the source
// tree, to notice a change during a build.
func (l *Loop) sourceDigest() (string, error) {
	h := sha256.New()
	files, total := 0, int64(0)
	err := filepath.WalkDir(l.cfg.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if l.skipDir(path) {
				return filepath.SkipDir
			}
			return nil
		}
		if ignored(d.Name()) || !d.Type().IsRegular() {
			return nil
		}
		files++
		if files > maxSourceFiles {
			return errTooLarge
		}
		rel, _ := filepath.Rel(l.cfg.Dir, path)
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		fh := sha256.New()
		n, err := io.Copy(fh, io.LimitReader(f, maxSourceBytes-total+1))
		total += n
		if err != nil {
			return err
		}
		if total > maxSourceBytes {
			return errTooLarge
		}
		io.WriteString(h, rel+"\x00"+hex.EncodeToString(fh.Sum(nil))+"\n")
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
