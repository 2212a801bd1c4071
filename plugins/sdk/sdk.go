package sdk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/internal/serve"
)

// Config describes a plugin.
type Config struct {
	// Name is the plugin's name in its manifest (a bound.Name); "" means
	// the executable's base name, lower-cased.
	Name string
	// Version is the plugin's version; "" means "0.0.0".
	Version string
	// Tools are the tools it serves.
	Tools []tool.Tool
	// Bounds the plugin accepts; zero means the host's.
	MaxRequestBytes, MaxResponseBytes, MaxConcurrentCalls uint32
	MaxCallMillis                                         uint64
}

// Serve serves tools under the executable's name until the host stops
// the plugin.
func Serve(tools ...tool.Tool) error {
	return Config{Tools: tools}.Serve(context.Background())
}

// Serve serves c until the host stops the plugin or ctx ends.
func (c Config) Serve(ctx context.Context) error {
	return serve.Run(ctx, c.options())
}

// Main serves c and exits: status 0 when the host stopped the plugin,
// 1 with the error on stderr otherwise.
func Main(c Config) {
	if err := c.Serve(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "plugin:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func (c Config) options() serve.Options {
	o := serve.Options{
		Name: c.Name, Version: c.Version, Tools: c.Tools,
		MaxRequestBytes: c.MaxRequestBytes, MaxResponseBytes: c.MaxResponseBytes,
		MaxConcurrentCalls: c.MaxConcurrentCalls, MaxCallMillis: c.MaxCallMillis,
	}
	if o.Name == "" {
		o.Name = strings.ToLower(strings.TrimSuffix(filepath.Base(os.Args[0]), filepath.Ext(os.Args[0])))
	}
	if o.Version == "" {
		o.Version = "0.0.0"
	}
	return o
}
