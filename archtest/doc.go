// Package archtest enforces the layer table (Layers, shown and explained in
// docs/architecture.md) and the purity of the kernel. Its tests run the checker against this module, so `make test`
// fails when a change breaks the architecture, with a message that names the
// file, the line and the rule.
//
// The rules:
//
//   - kernel-imports: a kernel file imports only kernel packages and the
//     standard-library packages on an explicit allow-list (KernelStd). The
//     list is positive: net/..., os, os/exec, syscall, reflect, unsafe,
//     plugin, math/rand and everything not named stay out. Kernel test files
//     may also import any standard-library package and the test libraries
//     (testify, goleak), never another layer of this module.
//   - kernel-deps: the full dependency set of every kernel package (go list
//     -deps) is standard library or kernel; nothing else, however indirect.
//   - kernel-words: kernel names (package, types, functions, methods, fields,
//     parameters, variables, constants, labels), string literals (event
//     kinds, struct tags, messages) and the comments of declarations do not
//     use the words of ForbiddenWords, their plurals or derived forms
//     ("children", "delegation"), also when split across two words
//     ("HandOff"). Words are compared whole, so "repair" and "workload" pass.
//     The package comment is exempt (a doc.go says what its package must not
//     know), and so are comments inside function bodies. This covers kernel
//     test files too.
//   - kernel-globals: the kernel has no global state. A non-test kernel
//     file declares no package-level variable whose type or initial value
//     names sync or sync/atomic, and no function writes (assigns,
//     increments) a package-level variable it does not shadow. Package
//     variables stay what initialisation made them: errors, problems and
//     lookup tables.
//   - layer-imports: a package outside the kernel imports only the folders
//     its row of the table names (Layers), the standard library and, where
//     the row allows it, third-party modules. Its test files may also import
//     any lower layer and the test libraries. Adapters (providers/, tools/,
//     store/) do not import each other: providers/a may import
//     providers/a/... and providers/internal/..., never providers/b.
//   - layer-unknown: every package of the module lives in a folder of the
//     table; a new folder enters the table before it gets code.
//   - exception-unused: an entry of Exceptions that excuses nothing is stale.
//
// The checker needs the go command (one `go list -deps` call) and go/parser;
// it knows nothing about what the packages do.
package archtest
