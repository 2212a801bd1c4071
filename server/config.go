package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path/filepath"
	"time"

	"github.com/spice-orch/spice-orch/job"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/eventlog"
	"github.com/spice-orch/spice-orch/orchestrator"
	"github.com/spice-orch/spice-orch/scheduler"
	"github.com/spice-orch/spice-orch/store"
)

// Defaults and limits of Config.
const (
	DefaultMaxBodyBytes  = 1 << 20
	MaxBodyBytes         = 16 << 20
	DefaultMaxStreams    = 512
	MaxStreams           = 1 << 16
	DefaultHeartbeat     = 15 * time.Second
	DefaultStreamLag     = 4096
	MaxStreamLag         = 1 << 16
	DefaultRetain        = 256
	MaxRetain            = 1 << 16
	DefaultStorePoll     = 500 * time.Millisecond
	DefaultRetainBytes   = 64 << 20
	MaxRetainBytes       = 1 << 40
	DefaultWriteTimeout  = 10 * time.Second
	DefaultHeaderTimeout = 10 * time.Second
	DefaultBodyTimeout   = 30 * time.Second
	DefaultIdleTimeout   = 2 * time.Minute
	// MaxHeaderBytes bounds a request's header block.
	MaxHeaderBytes = 64 << 10
	// DefaultMaxHealthStreams bounds the health streams (one per open
	// page) apart from the pairs' streams.
	DefaultMaxHealthStreams = 64
	// feedMaxEvents and feedMaxBytes bound what a feed keeps of one pair
	// in memory; a cursor older than what it keeps is served from the
	// store.
	feedMaxEvents = 1 << 16
	feedMaxBytes  = 64 << 20
)

// BuildRequest is what the server hands the host's BuildFunc for one
// submission.
type BuildRequest struct {
	// PairID is the new pair's ID, chosen by the server; use it as the
	// orchestrator config's ID.
	PairID string
	// Workspace is an existing, empty directory under Config.DataDir for
	// this pair alone: the only place its tools may touch.
	Workspace string
	// Body is the request body (the spec), at most Config.MaxBodyBytes,
	// and ContentType its media type without parameters: one of
	// "application/json", "application/yaml".
	Body        []byte
	ContentType string
	// Task, when not "", replaces the spec's task (?task=).
	Task string
	// Timeline is the pair's feed. It must be a required observer of the
	// pair timeline placed after the store, so that it is told only what
	// the store has made durable.
	Timeline eventlog.Observer
}

// Built is a pair config a BuildFunc made.
type Built struct {
	Config *orchestrator.Config
	// Close, if set, is called once the pair has ended.
	Close func()
	// Name is the spec's name, shown in lists and searched.
	Name string
	// Unpinned are the tools of the pair's plan whose code is not
	// pinned (a streamable-HTTP MCP server's); the page marks them.
	Unpinned []string
	// Spec is the submitted spec as it may be shown: a JSON value with no
	// secret in it. The pair resource carries it as its spec. Optional.
	Spec json.RawMessage
	// Redact, when set, is applied to every text of the submission that
	// the server shows (the name, the task, the system prompts, the
	// spec), to take out secrets of the host's that a client may have
	// copied into it.
	Redact func(string) string
}

// BuildFunc turns a submission into a pair config. A mistake in the
// request (a bad spec, a refused field) must be a *RequestError so the
// client gets a 400 naming it; any other error is a 500 whose message is
// not shown. ctx is the request's context after Config.SubmitContext.
type BuildFunc func(ctx context.Context, req BuildRequest) (Built, error)

// History is what the server reads of the pairs it does not keep in
// memory: a pair's record, its timeline by sequence included, and a
// listing, newest first. An unknown pair is store.ErrNotFound. The SQLite
// store implements it, and so does the JetStream backend, from its state
// bucket and events stream; a pair whose record says it is queued or
// running is followed by reading it again every StorePoll.
type History interface {
	Pair(ctx context.Context, pairID string) (store.PairRecord, error)
	ListPairs(ctx context.Context, o store.ListOptions) ([]store.PairSummary, error)
}

var _ History = (*store.Store)(nil)

// PairReaders is a History that reads a pair it follows by parts: each
// call of the function PairReader returns is the pair's record with
// only the events recorded since the call before (every event at the
// first). A stream following a pair another process plays then reads
// each event once, not the whole timeline at every StorePoll. The
// JetStream backend implements it.
type PairReaders interface {
	PairReader(pairID string) func(context.Context) (store.PairRecord, error)
}

// Queue is a job backend whose workers, in other processes, play the
// pairs: the server submits a pair's spec under the pair's ID and serves
// the pair from History. The JetStream backend implements it.
type Queue interface {
	job.Backend
	Submit(ctx context.Context, j job.Job) (job.Status, error)
}

// Example is one spec the start form offers.
type Example struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	ContentType string `json:"content_type"`
	Spec        string `json:"spec"`
}

// Config configures a Server. New copies it.
type Config struct {
	// Scheduler runs the pairs in this process; Queue, instead, hands
	// them to workers in other processes. Exactly one is required.
	// Store is where the server reads the pairs it does not keep in
	// memory; required. All are the host's: the server never closes them.
	Scheduler *scheduler.Scheduler
	Queue     Queue
	Store     History
	// Build turns a submitted spec into a pair; required.
	Build BuildFunc
	// DataDir is the server's data directory; each pair's workspace is
	// DataDir/workspaces/<pair ID>. Required, absolute.
	DataDir string
	// Examples are offered by the start form (GET /v1/examples).
	Examples []Example

	// Token, when set, is required on every API call as a bearer token
	// (or as the session cookie the login page sets). Without it the
	// server is for loopback only (CheckListen).
	Token string
	// Hosts are further Host header names allowed besides the loopback
	// names (localhost, 127.0.0.1, [::1]). Without a token every other
	// Host is refused (DNS rebinding); with a token and no Hosts, any.
	Hosts []string

	// MaxBodyBytes bounds a request body; 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// MaxStreams bounds the event streams of pairs open at once; 0 means
	// DefaultMaxStreams.
	MaxStreams int
	// MaxHealthStreams bounds the health streams open at once (GET
	// /v1/health as Server-Sent Events, which every open page holds).
	// They take none of MaxStreams, so idle pages leave the pairs'
	// streams their room. 0 means DefaultMaxHealthStreams; at most
	// MaxStreams.
	MaxHealthStreams int
	// Heartbeat is how often an idle event stream sends a comment; 0
	// means DefaultHeartbeat.
	Heartbeat time.Duration
	// StreamLag is how many events a stream may fall behind its pair
	// before it is disconnected (a slow client is never waited for); 0
	// means DefaultStreamLag.
	StreamLag int
	// WriteTimeout bounds each write to a stream; a client that does not
	// take the bytes in time is disconnected. 0 means DefaultWriteTimeout.
	WriteTimeout time.Duration
	// HeaderTimeout bounds the wait for a request's headers, BodyTimeout
	// the wait for its body, IdleTimeout a kept-alive connection between
	// requests (HTTPServer). 0 means the defaults.
	HeaderTimeout, BodyTimeout, IdleTimeout time.Duration
	// Retain bounds the finished pairs whose feeds stay in memory; older
	// ones stream from the store. 0 means DefaultRetain.
	Retain int
	// StorePoll is how often a stream of a pair that another process
	// plays into the store reads the store for its next events. 0 means
	// DefaultStorePoll.
	StorePoll time.Duration
	// RetainBytes bounds what those finished pairs' feeds hold in memory,
	// in encoded bytes: the oldest are let go until the rest fit. 0 means
	// DefaultRetainBytes.
	RetainBytes int64
	// KeepWorkspaces and KeepWorkspaceAge bound the workspaces of ended
	// pairs kept under DataDir/workspaces: after a pair ends, all but
	// the newest KeepWorkspaces are removed, and any older than
	// KeepWorkspaceAge. 0 means no bound of that kind; both 0 keep every
	// workspace.
	KeepWorkspaces   int
	KeepWorkspaceAge time.Duration

	// NewPairID names a new pair; nil means "pair-YYYYMMDD-HHMMSS-<8 hex>".
	NewPairID func() (string, error)
	// Clock is the wall clock; nil means time.Now.
	Clock func() time.Time

	// Approvals, when set, is the broker the pairs' engines ask approval
	// questions through: GET /v1/pairs/{id}/approvals lists a pair's
	// pending questions and POST /v1/pairs/{id}/approvals/{question}
	// answers one. Without it the list is empty and every answer is a 404.
	Approvals *orchestrator.Approvals
	// ServerQuestions says the host asks questions of its own through
	// Approvals, under the pair ID OwnQuestions (serve --mcp does, of a
	// candidate generation of its MCP servers). Without it GET
	// /v1/pairs/server/approvals answers 204 No Content, as there can be
	// no such question, and the page stops asking.
	ServerQuestions bool

	// Metrics, when set, is served at GET /metrics behind the same
	// authentication as the API.
	Metrics http.Handler
	// PluginDev, when set, is a plugin under development that future pairs
	// use: GET /v1/plugin-dev serves its state and the page shows it.
	PluginDev PluginDev
	// SubmitContext, when set, derives the context a submission is built
	// under from its request (for example to continue a trace named by a
	// traceparent header). It must not block.
	SubmitContext func(ctx context.Context, r *http.Request) context.Context
}

func (c *Config) normalize() error {
	switch {
	case c.Scheduler == nil && c.Queue == nil:
		return bound.Missing("server.scheduler")
	case c.Scheduler != nil && c.Queue != nil:
		return bound.Malformedf("server.queue", "a server takes a scheduler or a queue, not both")
	case c.Store == nil:
		return bound.Missing("server.store")
	case c.Build == nil:
		return bound.Missing("server.build")
	case c.DataDir == "":
		return bound.Missing("server.data_dir")
	case !filepath.IsAbs(c.DataDir):
		return bound.Malformedf("server.data_dir", "must be absolute")
	case c.ServerQuestions && c.Approvals == nil:
		return bound.Malformedf("server.server_questions", "the server's questions need Approvals to go through")
	}
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.MaxBodyBytes < 0 || c.MaxBodyBytes > MaxBodyBytes {
		return bound.Malformedf("server.max_body_bytes", "must be between 1 and 16 MiB")
	}
	if c.MaxStreams == 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if err := count("server.max_streams", c.MaxStreams, MaxStreams); err != nil {
		return err
	}
	if c.MaxHealthStreams == 0 {
		c.MaxHealthStreams = DefaultMaxHealthStreams
	}
	if err := count("server.max_health_streams", c.MaxHealthStreams, MaxStreams); err != nil {
		return err
	}
	if c.Heartbeat == 0 {
		c.Heartbeat = DefaultHeartbeat
	}
	if c.Heartbeat < 0 {
		return bound.Malformedf("server.heartbeat", "must not be negative")
	}
	if c.StreamLag == 0 {
		c.StreamLag = DefaultStreamLag
	}
	if err := count("server.stream_lag", c.StreamLag, MaxStreamLag); err != nil {
		return err
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	if c.WriteTimeout < 0 {
		return bound.Malformedf("server.write_timeout", "must not be negative")
	}
	for _, d := range []struct {
		v    *time.Duration
		def  time.Duration
		name string
	}{{&c.HeaderTimeout, DefaultHeaderTimeout, "header_timeout"}, {&c.BodyTimeout, DefaultBodyTimeout, "body_timeout"}, {&c.IdleTimeout, DefaultIdleTimeout, "idle_timeout"},
		{&c.StorePoll, DefaultStorePoll, "store_poll"}} {
		if *d.v == 0 {
			*d.v = d.def
		}
		if *d.v < 0 {
			return bound.Malformedf("server."+d.name, "must not be negative")
		}
	}
	if c.Retain == 0 {
		c.Retain = DefaultRetain
	}
	if err := count("server.retain", c.Retain, MaxRetain); err != nil {
		return err
	}
	if c.RetainBytes == 0 {
		c.RetainBytes = DefaultRetainBytes
	}
	if c.RetainBytes < 0 || c.RetainBytes > MaxRetainBytes {
		return bound.Malformedf("server.retain_bytes", "must be between 1 and 1 TiB")
	}
	if err := count("server.keep_workspaces", c.KeepWorkspaces, MaxRetain); err != nil {
		return err
	}
	if c.KeepWorkspaceAge < 0 {
		return bound.Malformedf("server.keep_workspace_age", "must not be negative")
	}
	if c.Clock == nil {
		c.Clock = time.Now
	}
	if c.NewPairID == nil {
		clock := c.Clock
		c.NewPairID = func() (string, error) { return newPairID(clock()) }
	}
	c.Examples = append([]Example(nil), c.Examples...)
	c.Hosts = append([]string(nil), c.Hosts...)
	return nil
}

// count is bound.Count, which takes a negative count for none, with
// negatives refused.
func count(field string, got, limit int) error {
	if got < 0 {
		return bound.Malformedf(field, "must not be negative")
	}
	return bound.Count(field, got, limit)
}

// newPairID returns "pair-YYYYMMDD-HHMMSS-xxxxxxxx": the UTC time and 32
// random bits, so IDs sort by start and do not collide in one store.
func newPairID(now time.Time) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return "pair-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:]), nil
}
