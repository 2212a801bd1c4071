package host

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
)

// Digest returns the lower-case hex SHA-256 of the file at path, the value
// to pin in Config.SHA256. The path must be absolute.
func Digest(path string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", &LaunchError{Path: path, Kind: ErrRelativePath}
	}
	f, err := os.Open(path)
	if err != nil {
		return "", &LaunchError{Path: path, Kind: ErrNotExecutable, Reason: "cannot open", Err: err}
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return "", &LaunchError{Path: path, Kind: ErrNotExecutable, Reason: "not a regular file", Err: err}
	}
	return hashAt(f, DefaultMaxBinaryBytes)
}

// hashAt hashes the whole of f from offset 0 without moving its offset,
// refusing more than max bytes.
func hashAt(f *os.File, max int64) (string, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, max+1))
	if err != nil {
		return "", &LaunchError{Path: f.Name(), Kind: ErrNotExecutable, Reason: "cannot read", Err: err}
	}
	if n > max {
		return "", &LaunchError{Path: f.Name(), Kind: ErrNotExecutable, Reason: "larger than max_binary_bytes"}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func sameDigest(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// openVerified opens path and checks that it is an executable regular file
// whose bytes hash to want. The open file is what will be executed.
func openVerified(path, want string, max int64) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &LaunchError{Path: path, Kind: ErrNotExecutable, Reason: "cannot open", Err: err}
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
		f.Close()
		return nil, &LaunchError{Path: path, Kind: ErrNotExecutable, Reason: "not an executable regular file", Err: err}
	}
	got, err := hashAt(f, max)
	if err != nil {
		f.Close()
		return nil, err
	}
	if !sameDigest(got, want) {
		f.Close()
		return nil, &LaunchError{Path: path, Kind: ErrDigest, Reason: "the file's SHA-256 is " + got + ", the pin is " + want}
	}
	return f, nil
}
