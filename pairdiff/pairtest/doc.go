// Package pairtest holds a test's timeline to a golden file of JSON lines:
// Golden fails the test with the first divergence (package pairdiff) when
// the timeline no longer matches, and `go test -update` rewrites the file
// instead.
//
// Times and identifiers are left out of the comparison unless asked for,
// so a golden file recorded with a real clock still matches a later run.
// The package is for tests: it registers the -update flag.
package pairtest
