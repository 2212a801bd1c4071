// Package scaling holds the benchmarks of README's "Scaling" section that
// no one package owns: how a run's cost per turn grows with its turns. It
// has no code of its own; it must not be imported.
package scaling
