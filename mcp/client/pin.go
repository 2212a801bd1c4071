package client

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"io"
	"os"
)

// Digest returns the lower-case hex SHA-256 of the file at path, the value
// to pin. The path must be absolute.
func Digest(path string) (string, error) {
	c := Config{Name: "digest", MaxFileBytes: DefaultMaxFileBytes}
	if err := checkPin(c, "path", path, "0000000000000000000000000000000000000000000000000000000000000000"); err != nil {
		return "", err
	}
	f, err := openPinned(c, "file", path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return hashAt(c, f)
}

func openPinned(c Config, what, path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, &ConnectError{Server: c.Name, Kind: ErrNotExecutable, Reason: what + " " + path + ": cannot open", Err: err}
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, &ConnectError{Server: c.Name, Kind: ErrNotExecutable, Reason: what + " " + path + ": not a regular file", Err: err}
	}
	return f, nil
}

// hashAt hashes the whole of f from offset 0 without moving its offset.
func hashAt(c Config, f *os.File) (string, error) {
	h := sha256.New()
	n, err := io.Copy(h, io.NewSectionReader(f, 0, c.MaxFileBytes+1))
	if err != nil {
		return "", &ConnectError{Server: c.Name, Kind: ErrNotExecutable, Reason: f.Name() + ": cannot read", Err: err}
	}
	if n > c.MaxFileBytes {
		return "", &ConnectError{Server: c.Name, Kind: ErrNotExecutable, Reason: f.Name() + ": larger than max_file_bytes"}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// verifyPin opens path and checks its bytes against want; the open file
// is returned so that what runs is what was hashed.
func verifyPin(c Config, what, path, want string) (*os.File, error) {
	f, err := openPinned(c, what, path)
	if err != nil {
		return nil, err
	}
	got, err := hashAt(c, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
		f.Close()
		return nil, &ConnectError{Server: c.Name, Kind: ErrDigest, Reason: what + " " + path + ": the SHA-256 is " + got + ", the pin is " + want}
	}
	return f, nil
}
