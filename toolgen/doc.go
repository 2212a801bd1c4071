// Package toolgen keeps generations of runtime tools behind leased plans.
//
// A generation is one verified unit: its tool definitions, what runs
// them, and how it is drained and stopped (Unit). A Set holds one active
// generation per slot beside the compiled tools, and serves plans of the
// active generations as a plan.Source. Activating a candidate changes only
// the plan future leases get: a lease keeps its plan's generations until
// it is released, and Release is a reference decrement that never waits.
// A generation no plan in use holds any more drains: it is given
// DrainTimeout for its calls in flight, then closed, or killed with the
// calls still running. Close refuses new leases and stops every
// generation within ShutdownTimeout. Retained plans, for LeaseExact, are
// bounded. Join makes one plan.Source of compiled tools and several
// sources (a pair's tools over generations that pairs share, plugins
// beside MCP servers): a joined lease holds a lease of each.
//
// It owns the bookkeeping only. It must not know what a unit is — a
// process, a connection, a protocol — nor when or why a candidate is
// made (a reload, a restart, a changed tool list): its callers, the
// plugin host and the MCP servers, verify a candidate before they hand it
// over.
package toolgen
