package jetstream

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// EmbeddedConfig configures an in-process NATS server with JetStream.
type EmbeddedConfig struct {
	// Dir holds JetStream's storage; a server restarted on the same Dir
	// finds every acknowledged job and event. Required.
	Dir string
	// Host and Port to listen on; "" means 127.0.0.1, 0 a free port.
	Host string
	Port int
	// MaxStore bounds JetStream's file storage in bytes; 0 means 1 GiB.
	MaxStore int64
	// Ready bounds the wait for the server to accept connections; 0
	// means 10 s.
	Ready time.Duration
}

// ErrNotReady is returned by StartEmbedded when the server did not accept
// connections in time.
var ErrNotReady = errors.New("jetstream: embedded server not ready")

// StartEmbedded starts a NATS server in this process with JetStream on
// cfg.Dir, no signal handlers and no logging. The caller shuts it down
// (Shutdown, then WaitForShutdown). Its address is ClientURL.
func StartEmbedded(cfg EmbeddedConfig) (*server.Server, error) {
	if cfg.Dir == "" {
		return nil, bound.Missing("jetstream.dir")
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.Port == 0 {
		cfg.Port = server.RANDOM_PORT
	}
	if cfg.MaxStore == 0 {
		cfg.MaxStore = 1 << 30
	}
	if cfg.Ready == 0 {
		cfg.Ready = 10 * time.Second
	}
	if cfg.Port != server.RANDOM_PORT {
		// The server, silent by design, would only fail to become ready:
		// an address in use is said now. Another process may still take
		// it in between; then it is ErrNotReady.
		addr := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("jetstream: embedded server cannot listen on %s: %w", addr, err)
		}
		if err := l.Close(); err != nil {
			return nil, err
		}
	}
	s, err := server.NewServer(&server.Options{
		Host:               cfg.Host,
		Port:               cfg.Port,
		NoSigs:             true,
		NoLog:              true,
		JetStream:          true,
		StoreDir:           cfg.Dir,
		JetStreamMaxStore:  cfg.MaxStore,
		JetStreamMaxMemory: 64 << 20,
		MaxPayload:         maxPayload,
	})
	if err != nil {
		return nil, err
	}
	s.Start()
	if !s.ReadyForConnections(cfg.Ready) {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, ErrNotReady
	}
	return s, nil
}
