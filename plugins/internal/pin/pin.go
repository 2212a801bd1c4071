package pin

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
)

// Bounds of a Set.
const (
	// MaxFiles bounds the files of a set, directories walked.
	MaxFiles = 4096
	// MaxPathBytes bounds one relative path.
	MaxPathBytes = 1024
	// MaxEntries bounds the entries of Set.Files.
	MaxEntries = 64
)

// Header is the first line of a listing.
const Header = "spice-plugin-files v1"

// Errors of Digest and Copy; each failure wraps one of them.
var (
	ErrSet           = errors.New("pin: invalid file set")
	ErrNotExecutable = errors.New("pin: not an executable regular file")
	ErrNotRegular    = errors.New("pin: not a regular file or directory")
	ErrTooLarge      = errors.New("pin: over the size bound")
	ErrMismatch      = errors.New("pin: digest mismatch")
)

// Set is what one pin covers.
type Set struct {
	// Exe is the clean absolute path of the executable.
	Exe string
	// Root is the clean absolute directory Files are relative to; it is
	// required when Files is not empty.
	Root string
	// Files are clean relative slash-separated paths under Root, of
	// regular files or of directories, which are walked (symbolic links
	// are refused; directories named __pycache__ are skipped, as
	// interpreters write them). Empty for a self-contained executable.
	Files []string
}

// Validate checks the shape of s without touching the file system.
func (s Set) Validate() error {
	if !filepath.IsAbs(s.Exe) || filepath.Clean(s.Exe) != s.Exe {
		return fmt.Errorf("%w: the executable needs a clean absolute path", ErrSet)
	}
	if len(s.Files) == 0 {
		if s.Root != "" {
			return fmt.Errorf("%w: a root without files", ErrSet)
		}
		return nil
	}
	if len(s.Files) > MaxEntries {
		return fmt.Errorf("%w: more than %d files entries", ErrSet, MaxEntries)
	}
	if !filepath.IsAbs(s.Root) || filepath.Clean(s.Root) != s.Root {
		return fmt.Errorf("%w: files need a clean absolute root", ErrSet)
	}
	for _, f := range s.Files {
		if err := checkRel(f); err != nil {
			return err
		}
	}
	return nil
}

func checkRel(f string) error {
	if f == "" || f == "." || len(f) > MaxPathBytes || path.Clean(f) != f || path.IsAbs(f) ||
		f == ".." || strings.HasPrefix(f, "../") || strings.ContainsFunc(f, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) {
		return fmt.Errorf("%w: %q is not a clean relative path inside the root", ErrSet, f)
	}
	return nil
}

// file is one file of a set: its path relative to the root and its source.
type file struct {
	rel, src string
}

// Digest returns the pin of s as it is on disk now, reading at most max
// bytes in all. It opens nothing that could block (a FIFO is refused). The
// executable's mode is not checked here; Copy checks it.
func Digest(s Set, max int64) (string, error) {
	if err := s.Validate(); err != nil {
		return "", err
	}
	files, err := list(s)
	if err != nil {
		return "", err
	}
	return digest(s.Exe, files, max, false)
}

// digest hashes the executable and the files (sources or copies);
// exec requires the executable's mode to allow execution.
func digest(exe string, files []file, max int64, exec bool) (string, error) {
	budget := max
	exeSum, err := hashFile(exe, &budget, true, exec)
	if err != nil {
		return "", err
	}
	if len(files) == 0 {
		return exeSum, nil
	}
	h := sha256.New()
	sums := make([]string, len(files))
	for i, f := range files {
		if sums[i], err = hashFile(f.src, &budget, false, false); err != nil {
			return "", err
		}
	}
	io.WriteString(h, Listing(exeSum, files2map(files, sums)))
	return hex.EncodeToString(h.Sum(nil)), nil
}

func files2map(files []file, sums []string) map[string]string {
	m := make(map[string]string, len(files))
	for i, f := range files {
		m[f.rel] = sums[i]
	}
	return m
}

// Listing is the text a set's digest hashes: the header line, "exe" and
// the executable's SHA-256, then "file", each file's SHA-256 and its
// relative path, sorted by path bytewise, one line each:
//
//	spice-plugin-files v1
//	exe 9f86d0...
//	file 2c26b4... gen/spiceorch/plugin/v1/plugin_pb2.py
//	file fcde2b... requirements.txt
func Listing(exeSum string, files map[string]string) string {
	var b strings.Builder
	b.WriteString(Header + "\nexe " + exeSum + "\n")
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString("file " + files[k] + " " + k + "\n")
	}
	return b.String()
}

// open opens a regular file for reading without blocking on a FIFO or a
// device, and checks what it opened.
// exe says p is the executable (its errors are ErrNotExecutable); mode
// requires its mode to allow execution.
func open(p string, exe, mode bool) (*os.File, os.FileInfo, error) {
	st, err := os.Lstat(p)
	if err != nil {
		return nil, nil, err
	}
	if !st.Mode().IsRegular() {
		if exe && st.Mode()&fs.ModeSymlink != 0 {
			// The executable may be a symlink; its target must be regular.
			if st, err = os.Stat(p); err != nil {
				return nil, nil, err
			}
		}
		if !st.Mode().IsRegular() {
			return nil, nil, fmt.Errorf("%w: %s", notRegular(exe), p)
		}
	}
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	st, err = f.Stat()
	if err != nil || !st.Mode().IsRegular() || (mode && st.Mode().Perm()&0o111 == 0) {
		f.Close()
		return nil, nil, fmt.Errorf("%w: %s", notRegular(exe), p)
	}
	return f, st, nil
}

func notRegular(exe bool) error {
	if exe {
		return ErrNotExecutable
	}
	return ErrNotRegular
}

// hashFile hashes the file at p, taking its bytes from budget.
func hashFile(p string, budget *int64, exe, mode bool) (string, error) {
	f, _, err := open(p, exe, mode)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, *budget+1))
	if err != nil {
		return "", err
	}
	if n > *budget {
		return "", fmt.Errorf("%w: %s", ErrTooLarge, p)
	}
	*budget -= n
	return hex.EncodeToString(h.Sum(nil)), nil
}

// list expands s.Files into files, sorted by relative path.
func list(s Set) ([]file, error) {
	var out []file
	seen := map[string]bool{}
	add := func(rel string) error {
		if seen[rel] {
			return nil
		}
		if len(out) == MaxFiles {
			return fmt.Errorf("%w: more than %d files", ErrTooLarge, MaxFiles)
		}
		if err := checkRel(rel); err != nil {
			return err
		}
		seen[rel] = true
		out = append(out, file{rel: rel, src: filepath.Join(s.Root, filepath.FromSlash(rel))})
		return nil
	}
	for _, entry := range s.Files {
		src := filepath.Join(s.Root, filepath.FromSlash(entry))
		st, err := os.Lstat(src)
		if err != nil {
			return nil, err
		}
		switch {
		case st.Mode().IsRegular():
			if err := add(entry); err != nil {
				return nil, err
			}
		case st.IsDir():
			err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				if d.IsDir() {
					if d.Name() == "__pycache__" {
						return filepath.SkipDir
					}
					return nil
				}
				if !d.Type().IsRegular() {
					return fmt.Errorf("%w: %s", ErrNotRegular, p)
				}
				rel, err := filepath.Rel(s.Root, p)
				if err != nil {
					return err
				}
				return add(filepath.ToSlash(rel))
			})
			if err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("%w: %s", ErrNotRegular, src)
		}
	}
	slices.SortFunc(out, func(a, b file) int { return strings.Compare(a.rel, b.rel) })
	return out, nil
}

// Copied is a verified private copy of a set.
type Copied struct {
	Exe  string // the copy of the executable
	Root string // the directory holding the copies of the files; "" without files
}

// Copy copies s into dir (which must exist, be private and empty of the
// names it makes: "exe" and "root"), then hashes the copies, once every
// copy is written and closed, and compares the result with want (64
// lower-case hex). On a mismatch it returns ErrMismatch and the digest of
// the copy; the caller removes dir. max bounds the bytes of the set.
func Copy(dir string, s Set, want string, max int64) (Copied, error) {
	if err := s.Validate(); err != nil {
		return Copied{}, err
	}
	files, err := list(s)
	if err != nil {
		return Copied{}, err
	}
	c := Copied{Exe: filepath.Join(dir, "exe")}
	budget := max
	if err := copyFile(c.Exe, s.Exe, 0o700, &budget, true); err != nil {
		return Copied{}, err
	}
	copies := make([]file, len(files))
	if len(files) > 0 {
		c.Root = filepath.Join(dir, "root")
		for i, f := range files {
			dst := filepath.Join(c.Root, filepath.FromSlash(f.rel))
			if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
				return Copied{}, err
			}
			if err := copyFile(dst, f.src, 0o600, &budget, false); err != nil {
				return Copied{}, err
			}
			copies[i] = file{rel: f.rel, src: dst}
		}
	}
	got, err := digest(c.Exe, copies, max, true)
	if err != nil {
		return Copied{}, err
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		return Copied{}, &MismatchError{Got: got, Want: want}
	}
	return c, nil
}

// MismatchError is a copy whose digest is not the pin.
type MismatchError struct{ Got, Want string }

func (e *MismatchError) Error() string {
	return "the SHA-256 of what would run is " + e.Got + ", the pin is " + e.Want
}

// Is matches ErrMismatch.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

func copyFile(dst, src string, mode os.FileMode, budget *int64, exe bool) error {
	in, _, err := open(src, exe, exe)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, *budget+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if n > *budget {
		return fmt.Errorf("%w: %s", ErrTooLarge, src)
	}
	*budget -= n
	return nil
}
