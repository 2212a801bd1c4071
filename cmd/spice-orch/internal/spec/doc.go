// Package spec owns the pair spec file of the spice-orch command: the two
// workers (role, provider, model, system prompt, maximum turns, an inline
// script for the scripted provider or connection options for the OpenAI
// one), the pattern, the handoff policy, the limits, the workspace and the
// approval policy.
//
// A spec is YAML; JSON, being YAML, is read the same way. Decoding is
// strict and walks the yaml.v3 node tree by hand, so every mistake is
// reported as an *Error with the file, the line and the field path:
// unknown or duplicate fields, wrong types, out-of-range values, anchors
// and aliases, more than one document, and inputs over MaxBytes. Values
// are checked against the same bounds the packages that use them enforce
// (kernel/bound, scripted, handoff, orchestrator), so a spec that decodes
// builds.
//
// The package turns text into a validated value and nothing more: it does
// not open files other than the one it is asked to read, build providers,
// tools or pairs, or read the environment.
package spec
