// Package bound publishes the size limits shared by providers, tools and the
// engine (K2), and the one typed error every kernel constructor returns for
// bad input.
//
// Limits are constants so that a provider can check a value before it hands
// it to the kernel and get the same answer the kernel would. Exceeding a
// limit is always an error, never a silent truncation.
//
// This package knows nothing about messages, tools or runs; it only names
// fields and numbers.
package bound
