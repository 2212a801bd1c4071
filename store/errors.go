package store

import (
	"errors"
	"strconv"
)

var (
	// ErrClosed is returned by every call after Close.
	ErrClosed = errors.New("store: closed")
	// ErrReadOnly is returned by Observe on a store opened read-only: the
	// event is not recorded, so it is not acknowledged.
	ErrReadOnly = errors.New("store: opened read-only")
	// ErrNotFound is returned for a pair, run or log the store has no
	// record of.
	ErrNotFound = errors.New("store: not found")
	// ErrNotStore is returned by Open for a database file that some other
	// program created.
	ErrNotStore = errors.New("store: not a spice-orch store")
	// ErrDamaged is returned by Open for a store file whose header or
	// pages SQLite or this package cannot make sense of: a schema version
	// no build ever wrote, a corrupt page, a file that is not a database.
	ErrDamaged = errors.New("store: the file is damaged")
)

// IntegrityError says that a sequence of a log already holds different
// bytes (a write tried to change a recorded event), or that a stored row
// does not decode to the event its columns describe. It names the log and
// the sequence, never the bytes.
type IntegrityError struct {
	Log    string
	Seq    uint64
	Reason string
	Err    error // the decoding error, for a row that does not decode
}

func (e *IntegrityError) Error() string {
	return "store: integrity: log " + strconv.Quote(e.Log) + " sequence " +
		strconv.FormatUint(e.Seq, 10) + ": " + e.Reason
}

func (e *IntegrityError) Unwrap() error { return e.Err }

// Integrity reasons.
const (
	reasonConflict = "the sequence already holds different bytes"
	reasonUndecode = "the stored row does not decode"
	reasonColumns  = "the stored row's columns disagree with its event"
)

// VersionError says the database's schema version is not the one this
// build reads: newer than it knows, or older on a read-only open, which
// cannot migrate.
type VersionError struct {
	Found     int // the database's schema version
	Supported int // the version this build reads and writes
}

func (e *VersionError) Error() string {
	if e.Found > e.Supported {
		return "store: schema version " + strconv.Itoa(e.Found) +
			" is newer than this build supports (" + strconv.Itoa(e.Supported) + ")"
	}
	return "store: schema version " + strconv.Itoa(e.Found) +
		" needs a migration to " + strconv.Itoa(e.Supported) + "; open it writable"
}
