// Package pluginlog owns the plugin log of a pair: a log of its own in
// the store, named PluginLogName(pairID), beside the pair timeline, that
// records the plugin host's generation and lease events under the host's
// kinds, with a plan.activated naming every generation (name, version,
// digest, path, PID) of the plan it activated. It owns the log's name, its
// payload schema and bound, the recorder that collects the host's events
// and appends them at flush points, and reading a recorded log back.
//
// It must not change the pair timeline's kinds or bytes, launch or manage
// plugins (that is plugins/host's), or decide exit codes.
package pluginlog
