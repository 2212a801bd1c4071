// Package boundary owns the readings of the kernel boundary that both
// archtest and the boundary proof (proof/acceptance) make: the kernel's
// exported API listing (KernelAPI), the forbidden-word checker (Forms: the
// multi-agent words the kernel must never contain, in identifiers, string
// literals and declaration comments), and the kernel's dependency
// set (KernelDeps). archtest enforces them on every `make test`; the proof
// records them in its ledger. Keeping one copy means the two can never
// disagree about what the kernel is.
//
// It reads source files and runs `go list`; it must not import anything of
// the module but the kernel's event kinds, which the API listing includes.
package boundary
