//go:build !unix

package conformance

import "errors"

// groupGone needs process groups; the suite's checks of them run on unix.
func groupGone(int) error {
	return errors.New("conformance: process groups are checked on unix only")
}
