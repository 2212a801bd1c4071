// Package enginetest provides deterministic parts for testing and
// benchmarking the engine and anything built on it: a scripted model
// provider, a stepping clock, a recording observer and small tools.
//
// It is a test helper, like net/http/httptest: production code must not
// use it (the boundary proof, proof/acceptance, is a test suite and does).
// It knows the kernel's interfaces and nothing above them.
package enginetest
