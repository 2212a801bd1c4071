package host

import "errors"

// Launch failures. A *LaunchError matches one of them with errors.Is.
var (
	ErrConfig        = errors.New("plugin config invalid")
	ErrRelativePath  = errors.New("plugin path is not absolute")
	ErrNotExecutable = errors.New("plugin file is not an executable regular file")
	ErrDigest        = errors.New("plugin digest mismatch")
	ErrStartup       = errors.New("plugin did not start")
	ErrStartTimeout  = errors.New("plugin startup timed out")
	ErrContaminated  = errors.New("plugin wrote to stdout before its handshake line")
	ErrHandshake     = errors.New("plugin handshake malformed")
	ErrProof         = errors.New("plugin could not prove the launch secret")
	ErrProtocol      = errors.New("plugin speaks another protocol version")
	ErrManifest      = errors.New("plugin manifest invalid")
	ErrExited        = errors.New("plugin exited")
	ErrUnsupported   = errors.New("plugin launch unsupported on this system")
)

// LaunchError is why a launch failed. It names the plugin by path, never
// quotes the secret, and keeps the tail of the plugin's stderr.
type LaunchError struct {
	Path   string
	Kind   error // one of the Err values above
	Reason string
	Stderr []string
	Err    error // the underlying cause, if any
}

func (e *LaunchError) Error() string {
	s := "plugin " + e.Path + ": " + e.Kind.Error()
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	return s
}

// Is matches the Kind.
func (e *LaunchError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the cause.
func (e *LaunchError) Unwrap() error { return e.Err }
