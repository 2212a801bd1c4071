//go:build unix

package store

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// lockOwner creates the lock file at path and takes an exclusive lock on
// it, which the kernel releases when the file is closed or the process
// ends. flock locks belong to the open file, so even another open of the
// same store in this process sees it held.
func lockOwner(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		os.Remove(path)
		return nil, err
	}
	return f, nil
}

// ownerAlive reports whether the lock at path is held. A missing file is
// an owner that is gone; a file this process cannot open or lock for
// another reason counts as held.
func ownerAlive(path string) bool {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	defer f.Close()
	fd := int(f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return true // EWOULDBLOCK: its owner holds it
	}
	_ = syscall.Flock(fd, syscall.LOCK_UN)
	return false
}
