package client

import "errors"

// Connect failures. A *ConnectError matches one of them with errors.Is.
var (
	ErrConfig            = errors.New("mcp server config invalid")
	ErrRelativePath      = errors.New("mcp server path is not absolute")
	ErrNotExecutable     = errors.New("mcp server file is not a regular file")
	ErrDigest            = errors.New("mcp server digest mismatch")
	ErrURL               = errors.New("mcp server URL is neither loopback nor HTTPS")
	ErrStartup           = errors.New("mcp server did not start")
	ErrStartTimeout      = errors.New("mcp server startup timed out")
	ErrInitialize        = errors.New("mcp server initialization failed")
	ErrList              = errors.New("mcp server tool listing failed")
	ErrTooManyTools      = errors.New("mcp server lists too many tools")
	ErrDefinition        = errors.New("mcp tool definition invalid")
	ErrDefinitionChanged = errors.New("mcp tool definition differs from its pin")
)

// ConnectError is why a connection failed. It names the server, never its
// environment, and keeps the tail of its stderr.
type ConnectError struct {
	Server string // the configured name
	Kind   error  // one of the Err values above
	Reason string
	Stderr []string
	Err    error // the underlying cause, if any
}

func (e *ConnectError) Error() string {
	s := "mcp server " + e.Server + ": " + e.Kind.Error()
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is matches the Kind.
func (e *ConnectError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *ConnectError) Unwrap() error { return e.Err }
