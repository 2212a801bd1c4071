// Package scaling holds the scaling benchmarks (BENCHMARKS.md, and the
// curves `make scaling-plot` draws) that no one package owns: how a run's
// cost per turn grows with its turns, and a review loop's cost per round
// with its rounds. It has no code of
// its own; it must not be imported.
package scaling
