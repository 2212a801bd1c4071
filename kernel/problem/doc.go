// Package problem owns Problem: a short, typed, secret-free description of
// what went wrong, shown to a model (a tool's model-visible problem), carried
// by a failed stream item, or recorded in a failure event.
//
// A Problem is data, not an error: it crosses the model boundary and the event
// log, so its code is a stable machine-readable word and its message is
// bounded text written for a reader.
package problem
