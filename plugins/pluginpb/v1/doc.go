// Package pluginv1 holds the Go code generated from
// plugins/proto/spiceorch/plugin/v1/plugin.proto (make plugins-proto-go);
// only this file is written by hand. It knows the wire protocol and
// nothing about hosts, plugins or the kernel.
package pluginv1
