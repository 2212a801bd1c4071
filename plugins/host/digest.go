package host

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/spice-orch/spice-orch/plugins/internal/pin"
)

// Digest returns the lower-case hex SHA-256 of the file at path, the value
// to pin in Config.SHA256 of a self-contained executable. The path must
// be absolute. A FIFO or a device is refused without being opened.
func Digest(path string) (string, error) {
	return DigestFiles(path, "", nil)
}

// DigestFiles returns the pin of an executable and the files it loads
// (Config.Root and Config.Files): with no files, the executable's SHA-256;
// with files, the SHA-256 of their listing (plugins/PROTOCOL.md).
func DigestFiles(path, root string, files []string) (string, error) {
	if !filepath.IsAbs(path) {
		return "", &LaunchError{Path: path, Kind: ErrRelativePath}
	}
	d, err := pin.Digest(pin.Set{Exe: path, Root: root, Files: files}, DefaultMaxBinaryBytes)
	if err != nil {
		return "", pinError(path, err)
	}
	return d, nil
}

// pinError maps a failure of package pin onto a LaunchError.
func pinError(path string, err error) error {
	kind, reason := ErrNotExecutable, "cannot read"
	switch {
	case errors.Is(err, pin.ErrMismatch):
		kind, reason = ErrDigest, err.Error()
	case errors.Is(err, pin.ErrSet):
		kind, reason = ErrConfig, err.Error()
	case errors.Is(err, pin.ErrNotExecutable):
		reason = "not an executable regular file"
	case errors.Is(err, pin.ErrNotRegular):
		reason = "a pinned file is not a regular file or directory"
	case errors.Is(err, pin.ErrTooLarge):
		reason = "larger than max_binary_bytes"
	case errors.Is(err, os.ErrNotExist):
		reason = "cannot open"
	}
	return &LaunchError{Path: path, Kind: kind, Reason: reason, Err: err}
}

// copyVerified copies the pinned set into dir/pin and verifies the copy.
func copyVerified(dir string, cfg Config) (pin.Copied, error) {
	pd := filepath.Join(dir, "pin")
	if err := os.Mkdir(pd, 0o700); err != nil {
		return pin.Copied{}, &LaunchError{Path: cfg.Path, Kind: ErrStartup, Reason: "cannot make the private directory", Err: err}
	}
	c, err := pin.Copy(pd, pin.Set{Exe: cfg.Path, Root: cfg.Root, Files: cfg.Files}, cfg.SHA256, cfg.MaxBinaryBytes)
	if err != nil {
		return pin.Copied{}, pinError(cfg.Path, err)
	}
	return c, nil
}

// shortRoots are where a launch's private directory is made when the
// configured or temporary directory is too long for a Unix socket path.
var shortRoots = []string{"/tmp", "/dev/shm", "/var/tmp"}

// privateDir makes the launch's private directory (mode 0700) under
// SocketRoot, or, when SocketRoot is not set and the temporary directory
// is too long for a socket path inside it, under a short system one.
func privateDir(cfg Config) (string, error) {
	roots := []string{cfg.SocketRoot}
	if cfg.SocketRoot == "" {
		roots = append([]string{os.TempDir()}, shortRoots...)
	}
	var err error
	for _, root := range roots {
		if len(filepath.Join(root, "spice-plugin-0123456789", "x.sock"))+16 > maxSocketPath {
			continue
		}
		var dir string
		dir, err = os.MkdirTemp(root, "spice-plugin-")
		if err == nil {
			return dir, nil
		}
	}
	if err != nil {
		return "", &LaunchError{Path: cfg.Path, Kind: ErrStartup, Reason: "cannot make the private directory", Err: err}
	}
	return "", &LaunchError{Path: cfg.Path, Kind: ErrConfig, Reason: "socket_root is too long for a Unix socket path"}
}
