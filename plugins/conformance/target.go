package conformance

import (
	"context"

	"google.golang.org/grpc"
)

// Target is one launched plugin process under test.
type Target interface {
	// Conn is the gRPC connection to the plugin's endpoint. It adds no
	// credentials: the suite sets x-spice-plugin-auth per call.
	Conn() grpc.ClientConnInterface
	// AuthToken is the value of x-spice-plugin-auth for this launch.
	AuthToken() string
	// Handshake is the plugin's handshake line, whose proof the launcher
	// verified.
	Handshake() Handshake
	// PID is the plugin's process; it leads its own process group.
	PID() int
	// Done is closed once the process has exited and was reaped.
	Done() <-chan struct{}
	// CloseStdin ends the plugin's stdin, which tells it the host is gone.
	CloseStdin() error
	// Close stops the process tree if it still runs and releases the
	// connection, pipes and directory. It is idempotent and bounded.
	Close() error
}

// Launcher starts plugin processes for the suite.
type Launcher interface {
	// Launch starts one process and completes the handshake. The error
	// of a launch that the plugin refused (it exited without a handshake
	// line) matches ErrExited.
	Launch(ctx context.Context, cfg LaunchConfig) (Target, error)
}

// LaunchConfig is what a case may vary between launches.
type LaunchConfig struct {
	// Protocols is SPICE_PLUGIN_PROTOCOLS; empty means "1".
	Protocols string
}
