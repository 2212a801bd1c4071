package spec

import (
	"time"

	"github.com/spice-orch/spice-orch/providers/scripted"
)

// Pattern is how the two workers take turns.
type Pattern string

const (
	// Relay runs the first worker, then the second on its answer, once.
	Relay Pattern = "relay"
	// Review runs the first worker, then the second on its answer, and
	// again with the second's feedback until it approves or a limit ends
	// the pair.
	Review Pattern = "review"
)

// Provider names a worker's model provider.
type Provider string

const (
	// Scripted answers from a script, offline (providers/scripted).
	Scripted Provider = "scripted"
	// OpenAI streams Chat Completions from OpenAI or a compatible server
	// (providers/openai); the key and default base URL come from the
	// environment, never from a spec.
	OpenAI Provider = "openai"
)

// Over says what happens to a handoff over its byte bound.
type Over string

const (
	// OverError ends the pair with a handoff_rejected failure.
	OverError Over = "error"
	// OverTruncate cuts the answer and appends a visible marker.
	OverTruncate Over = "truncate"
)

// Limits and defaults of a spec.
const (
	// MaxBytes bounds a spec file.
	MaxBytes = 4 << 20
	// MaxTurns bounds a worker's max_turns (the engine's default cap).
	MaxTurns = 64
	// DefaultMaxTurns is a worker's max_turns when the spec leaves it out.
	DefaultMaxTurns = 8
	// DefaultScriptedModel is a scripted worker's model when the spec
	// leaves it out.
	DefaultScriptedModel = "scripted-1"
	// MaxOutputTokens bounds openai.max_output_tokens.
	MaxOutputTokens = 1 << 20
	// MaxTimeout bounds openai.timeout and limits.budget.wall_time.
	MaxTimeout = 24 * time.Hour
	// MaxJSONDepth bounds the nesting of a scripted call's arguments.
	MaxJSONDepth = 64
)

// DefaultTask is the task of a run that names none, on the command line or
// in its spec.
const DefaultTask = "Write a short note for Go developers on why small packages are easier to maintain."

// Spec is a decoded, validated pair spec. The zero value is not valid; use
// Decode, DecodeFile or Builtin.
type Spec struct {
	// File is where the spec came from ("" for the built-in pair); a
	// relative Workspace is resolved against its directory.
	File string
	// Name labels the pair; optional.
	Name string
	// Task is the default task; optional (the command line's --task wins).
	Task    string
	Pattern Pattern
	// Workspace is the directory the file tools are confined to; optional.
	// It is a local path (filepath.IsLocal): relative to the spec's folder
	// and inside it. Whether symbolic links keep it inside is for the
	// caller to check (see WorkspaceError), since decoding reads no files.
	Workspace string
	// WorkspaceLine is Workspace's line in the spec file.
	WorkspaceLine int
	// Approve is which tool calls wait for a person's approval before
	// they run: "never", "mutating", "all", or tool names separated by
	// commas, as orchestrator.ParseApprovalPolicy reads it. "" means
	// never; the command line's --approve wins.
	Approve string
	Workers [2]Worker
	Handoff Handoff
	Limits  Limits
	// Plugins are runtime tool plugins whose tools join the pair's plan
	// beside the compiled tools (plugins.go).
	Plugins []Plugin
	// MCPServers are MCP servers whose tools join the pair's plan beside
	// the compiled tools (mcp.go).
	MCPServers []MCPServer
}

// Worker is one worker of the pair.
type Worker struct {
	Role     string
	Provider Provider
	Model    string
	System   string
	MaxTurns int
	// Script is a scripted worker's script. Builtin marks a scripted
	// worker without an inline script: it answers from the built-in
	// script of its role (writer or reviewer).
	Script  scripted.Script
	Builtin bool
	// Calls are where each call of an inline Script is written, in the
	// script's order, for errors found after decoding (a tool the plan
	// lacks, arguments its schema refuses).
	Calls []CallSite
	// OpenAI holds an openai worker's connection options.
	OpenAI OpenAIOptions
}

// CallSite is where one scripted call is written.
type CallSite struct {
	Step, Call int    // indexes into Script.Steps and that step's Calls
	Field      string // "workers[0].script[1].calls[0]"
	Line       int    // its line in the spec file
}

// OpenAIOptions are the per-worker options of the openai provider. A zero
// field means the provider's default (BaseURL: $OPENAI_BASE_URL, then
// OpenAI's API).
type OpenAIOptions struct {
	BaseURL         string
	Timeout         time.Duration
	Temperature     *float64
	MaxOutputTokens int
}

// Handoff is the handoff policy. A zero field means the handoff package's
// default.
type Handoff struct {
	MaxBytes    int
	Over        Over // "" means OverError
	TaskHeading string
	DoneMarker  string
	// Headings maps a role to the heading its answers get.
	Headings map[string]string
}

// Limits bound the pair. A zero field means no limit (MaxRounds: the
// orchestrator's default).
type Limits struct {
	MaxRounds int
	Tokens    int64
	ToolCalls int64
	WallTime  time.Duration
	// FinalAnswer is on_limit: final_answer: when max rounds or a budget
	// ends the pair, the worker holding the latest draft answers once
	// more, without tools, within FinalAnswerReserve of the token and
	// wall-time budgets (0: the orchestrator's default).
	FinalAnswer        bool
	FinalAnswerReserve float64
}

// The values of limits.on_limit.
const (
	OnLimitStop        = "stop"
	OnLimitFinalAnswer = "final_answer"
)

// Builtin returns the built-in pair: a scripted writer and reviewer that
// call the real file tools, go through one rejected round and one approved
// one, and finish in well under a second, offline.
func Builtin() Spec {
	w, r := scripted.Builtin()
	return Spec{
		Name:    "builtin-review",
		Task:    DefaultTask,
		Pattern: Review,
		Workers: [2]Worker{
			{Role: scripted.WriterName, Provider: Scripted, Model: DefaultScriptedModel, MaxTurns: 4,
				System: "You are a careful technical writer. Write the draft to " + scripted.DraftPath +
					" with fs.write, then answer with the draft. Revise it when the reviewer gives feedback.",
				Script: w, Builtin: true},
			{Role: scripted.ReviewerName, Provider: Scripted, Model: DefaultScriptedModel, MaxTurns: 4,
				System: "You review drafts. Read " + scripted.DraftPath + " with fs.read and measure it with text.stats. " +
					"Answer with feedback, or with a line " + scripted.DoneMarker + " when the draft is ready.",
				Script: r, Builtin: true},
		},
		Handoff: Handoff{DoneMarker: scripted.DoneMarker},
		Limits:  Limits{MaxRounds: 3},
	}
}
