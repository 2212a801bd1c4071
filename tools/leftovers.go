package tools

import (
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"
)

// MaxLeftoverScan bounds how many entries RemoveLeftovers looks at.
const MaxLeftoverScan = 100_000

// errScanBound ends a scan that reached MaxLeftoverScan.
var errScanBound = errors.New("tools: workspace scan bound reached")

// RemoveLeftovers removes from the workspace at root the temporary files
// of fs.write writes that never finished (the process was killed between
// creating the file and renaming it) and were last modified before
// before: a later one may belong to a write in progress in another
// process. Symbolic links are not followed. It returns how many it
// removed; at most MaxLeftoverScan entries are looked at.
func RemoveLeftovers(root string, before time.Time) (int, error) {
	r, err := os.OpenRoot(root)
	if err != nil {
		return 0, err
	}
	defer r.Close()
	removed, seen := 0, 0
	err = fs.WalkDir(r.FS(), ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory holds nothing to remove
		}
		if seen++; seen > MaxLeftoverScan {
			return errScanBound
		}
		if !d.Type().IsRegular() || !isTempName(d.Name()) {
			return nil
		}
		if fi, err := d.Info(); err != nil || !fi.ModTime().Before(before) {
			return nil
		}
		if r.Remove(path) == nil {
			removed++
		}
		return nil
	})
	if errors.Is(err, errScanBound) {
		err = nil
	}
	return removed, err
}

// isTempName reports whether name is one fs.write gives its temporary
// files: TempPrefix, 16 hex digits, ".tmp".
func isTempName(name string) bool {
	mid, ok := strings.CutPrefix(name, TempPrefix)
	if !ok {
		return false
	}
	mid, ok = strings.CutSuffix(mid, ".tmp")
	if !ok || len(mid) != 16 {
		return false
	}
	_, err := hex.DecodeString(mid)
	return err == nil
}
