// Package pin defines what a plugin pin covers and makes the private copy
// a launch executes.
//
// A pin is a SHA-256 over a Set: the executable and, for an interpreted
// plugin, the files it loads (its own sources and its dependency lock
// file). With no files the digest is the SHA-256 of the executable's
// bytes; with files it is the SHA-256 of a listing of every file's digest
// (Listing). Copy copies the set into a private directory, closes the
// copies and only then hashes them: the bytes a launch executes are the
// bytes it verified, whatever another process writes to the originals
// meanwhile.
//
// The plugin host and the conformance suite's launcher both use it. It
// must not know about processes, protocols or tools.
package pin
