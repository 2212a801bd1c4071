// Package render owns the readable pair timeline: it turns the pair
// timeline's canonical JSON lines — exactly what `spice-orch run --json`
// prints and what the store replays — into lines a person reads: each
// worker's runs and turns, its streamed answer, its tool calls with their
// outcome, each handoff, and a summary at the pair's terminal (reason,
// rounds, runs, tool calls, tokens, duration).
//
// Rendering from the bytes rather than from live values keeps one code
// path for a live run and for `spice-orch runs show`, so both read the
// same. The package decodes and formats; it must not run pairs, open the
// store or decide exit codes. Unknown kinds are shown by name, never
// refused: a newer timeline still renders.
package render
