//go:build !unix

package store

import "os"

// lockOwner creates the lock file; without flock it locks nothing.
func lockOwner(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
}

// ownerAlive cannot tell here: every other owner counts as gone, as every
// owner did before owners were recorded.
func ownerAlive(string) bool { return false }
