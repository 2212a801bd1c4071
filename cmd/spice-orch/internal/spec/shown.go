package spec

import (
	"encoding/json"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/providers/scripted"
)

// Redacted stands for a secret in what Shown returns.
const Redacted = "[redacted]"

// MaxShownBytes bounds the JSON of a Shown spec (Shown.JSON).
const MaxShownBytes = 256 << 10

// maxShownText is how much of a long text (the task, a system prompt)
// JSON keeps when the whole spec is over MaxShownBytes.
const maxShownText = 4 << 10

// Shown is a spec as it may be shown to whoever reads the pair (the web
// page, the API): its fields under their spec names, with no value that
// may hold a secret. An MCP server's env values, its arguments' values
// (shownArg) and a URL's credentials, query and fragment are Redacted. A
// spec holds no API key (providers read theirs from the environment), so
// none can be shown.
type Shown struct {
	Version    int         `json:"version"`
	Name       string      `json:"name,omitempty"`
	Task       string      `json:"task,omitempty"`
	Pattern    Pattern     `json:"pattern"`
	Workspace  string      `json:"workspace,omitempty"`
	Approve    string      `json:"approve,omitempty"`
	Workers    []shownWkr  `json:"workers"`
	Handoff    *shownHand  `json:"handoff,omitempty"`
	Limits     shownLimits `json:"limits"`
	Plugins    []shownPlug `json:"plugins,omitempty"`
	MCPServers []shownMCP  `json:"mcp_servers,omitempty"`
	// Omitted says why the fields not shown are left out.
	Omitted string `json:"omitted,omitempty"`
}

type shownWkr struct {
	Role     string    `json:"role"`
	Provider Provider  `json:"provider"`
	Model    string    `json:"model,omitempty"`
	System   string    `json:"system,omitempty"`
	MaxTurns int       `json:"max_turns,omitempty"`
	Script   any       `json:"script,omitempty"` // steps, "builtin" or "N steps"
	OpenAI   *shownOAI `json:"openai,omitempty"`
}

type shownOAI struct {
	BaseURL         string   `json:"base_url,omitempty"`
	Timeout         string   `json:"timeout,omitempty"`
	Temperature     *float64 `json:"temperature,omitempty"`
	MaxOutputTokens int      `json:"max_output_tokens,omitempty"`
}

type shownHand struct {
	MaxBytes    int               `json:"max_bytes,omitempty"`
	Over        Over              `json:"over_bound,omitempty"`
	TaskHeading string            `json:"task_heading,omitempty"`
	DoneMarker  string            `json:"done_marker,omitempty"`
	Headings    map[string]string `json:"headings,omitempty"`
}

type shownLimits struct {
	MaxRounds          int          `json:"max_rounds,omitempty"`
	Budget             *shownBudget `json:"budget,omitempty"`
	OnLimit            string       `json:"on_limit,omitempty"`
	FinalAnswerReserve float64      `json:"final_answer_reserve,omitempty"`
}

type shownBudget struct {
	Tokens    int64  `json:"tokens,omitempty"`
	ToolCalls int64  `json:"tool_calls,omitempty"`
	WallTime  string `json:"wall_time,omitempty"`
}

type shownPlug struct {
	Path   string   `json:"path"`
	SHA256 string   `json:"sha256"`
	Name   string   `json:"name,omitempty"`
	Root   string   `json:"root,omitempty"`
	Files  []string `json:"files,omitempty"`
}

type shownMCP struct {
	Name   string             `json:"name"`
	Path   string             `json:"path,omitempty"`
	SHA256 string             `json:"sha256,omitempty"`
	Entry  *FilePin           `json:"entry,omitempty"`
	Lock   *FilePin           `json:"lock,omitempty"`
	Args   []string           `json:"args,omitempty"`
	Env    []string           `json:"env,omitempty"`
	Dir    string             `json:"dir,omitempty"`
	URL    string             `json:"url,omitempty"`
	Tools  map[string]MCPTool `json:"tools,omitempty"`
}

// Shown returns s without its secrets, for showing.
func (s Spec) Shown() Shown {
	v := Shown{Version: 1, Name: s.Name, Task: s.Task, Pattern: s.Pattern, Workspace: s.Workspace, Approve: s.Approve,
		Workers: make([]shownWkr, 0, len(s.Workers))}
	for _, w := range s.Workers {
		sw := shownWkr{Role: w.Role, Provider: w.Provider, Model: w.Model, System: w.System, MaxTurns: w.MaxTurns}
		switch {
		case w.Builtin:
			sw.Script = "builtin"
		case len(w.Script.Steps) > 0:
			sw.Script = w.Script.Steps
		}
		if o := w.OpenAI; o != (OpenAIOptions{}) {
			sw.OpenAI = &shownOAI{BaseURL: shownURL(o.BaseURL), Temperature: o.Temperature, MaxOutputTokens: o.MaxOutputTokens}
			if o.Timeout > 0 {
				sw.OpenAI.Timeout = o.Timeout.String()
			}
		}
		v.Workers = append(v.Workers, sw)
	}
	if h := s.Handoff; h.MaxBytes != 0 || h.Over != "" || h.TaskHeading != "" || h.DoneMarker != "" || len(h.Headings) > 0 {
		v.Handoff = &shownHand{MaxBytes: h.MaxBytes, Over: h.Over, TaskHeading: h.TaskHeading, DoneMarker: h.DoneMarker, Headings: h.Headings}
	}
	l := s.Limits
	v.Limits = shownLimits{MaxRounds: l.MaxRounds, FinalAnswerReserve: l.FinalAnswerReserve}
	if l.FinalAnswer {
		v.Limits.OnLimit = OnLimitFinalAnswer
	}
	if l.Tokens != 0 || l.ToolCalls != 0 || l.WallTime != 0 {
		v.Limits.Budget = &shownBudget{Tokens: l.Tokens, ToolCalls: l.ToolCalls}
		if l.WallTime > 0 {
			v.Limits.Budget.WallTime = l.WallTime.String()
		}
	}
	for _, p := range s.Plugins {
		v.Plugins = append(v.Plugins, shownPlug{Path: p.Path, SHA256: p.SHA256, Name: p.Name, Root: p.Root, Files: p.Files})
	}
	for _, m := range s.MCPServers {
		sm := shownMCP{Name: m.Name, Path: m.Path, SHA256: m.SHA256, Entry: m.Entry, Lock: m.Lock,
			Dir: m.Dir, URL: shownURL(m.URL), Tools: m.Tools}
		for _, a := range m.Args {
			sm.Args = append(sm.Args, shownArg(a))
		}
		// An environment is where a server's credentials are given:
		// its names are shown, never its values.
		for _, kv := range m.Env {
			k, _, _ := strings.Cut(kv, "=")
			sm.Env = append(sm.Env, k+"="+Redacted)
		}
		v.MCPServers = append(v.MCPServers, sm)
	}
	return v
}

// JSON encodes v within MaxShownBytes. Over it, each inline script is
// shown as its step count; still over, the task and the system prompts
// are cut to their first maxShownText bytes and a marker of how many
// were left out; still over (long lists of files or arguments), only
// the fields of bounded size are shown: the name, the pattern, the
// workers without their prompts and scripts, the handoff and the limits,
// with Omitted saying so. HTML characters are left as they are; a reader
// shows the text as text.
func (v Shown) JSON() ([]byte, error) {
	b, err := marshalText(v)
	if err != nil || len(b) <= MaxShownBytes {
		return b, err
	}
	v.Workers = append([]shownWkr(nil), v.Workers...)
	for i := range v.Workers {
		if s, ok := v.Workers[i].Script.([]scripted.Step); ok {
			v.Workers[i].Script = steps(len(s))
		}
	}
	if b, err = marshalText(v); err != nil || len(b) <= MaxShownBytes {
		return b, err
	}
	v.Task = cut(v.Task, maxShownText)
	for i := range v.Workers {
		v.Workers[i].System = cut(v.Workers[i].System, maxShownText)
	}
	if b, err = marshalText(v); err != nil || len(b) <= MaxShownBytes {
		return b, err
	}
	small := Shown{Version: v.Version, Name: v.Name, Pattern: v.Pattern, Handoff: v.Handoff, Limits: v.Limits,
		Workers: make([]shownWkr, 0, len(v.Workers)),
		Omitted: "the rest of the spec is over " + strconv.Itoa(MaxShownBytes) + " bytes when shown"}
	for _, w := range v.Workers {
		small.Workers = append(small.Workers, shownWkr{Role: w.Role, Provider: w.Provider, Model: w.Model, MaxTurns: w.MaxTurns})
	}
	return marshalText(small)
}

// cut returns s, or its first n bytes or fewer (whole characters)
// followed by a marker of how many more it has.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " [… " + strconv.Itoa(len(s)-n) + " more bytes not shown]"
}

func steps(n int) string {
	if n == 1 {
		return "1 step"
	}
	return strconv.Itoa(n) + " steps"
}

func marshalText(v any) ([]byte, error) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return []byte(strings.TrimSuffix(b.String(), "\n")), nil
}

// shownArg is a as it may be shown. A token is often given on the
// command line, as --key=TOKEN, --key TOKEN or -kTOKEN, so only what
// cannot be one is shown: the name of a long flag (letters, '-' and
// '_', at most 32 bytes) without its value, a one-letter flag, and
// WorkspaceArg. Every other argument is Redacted, the value of a flag
// included. Showing the names, rather than only how many arguments
// there are, tells a reader how the server was started.
func shownArg(a string) string {
	if a == WorkspaceArg {
		return a
	}
	name, _, value := strings.Cut(a, "=")
	flag := false
	switch {
	case len(name) == 2 && name[0] == '-':
		flag = isLetter(name[1])
	case len(name) >= 3 && len(name) <= 32 && strings.HasPrefix(name, "--") && isLetter(name[2]):
		flag = strings.Trim(name[2:], "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-_") == ""
	}
	switch {
	case !flag:
		return Redacted
	case value:
		return name + "=" + Redacted
	}
	return name
}

func isLetter(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' }

// shownURL is u without what may be a secret in it: the user and
// password (a token is often given as either), the query and the
// fragment, each replaced by Redacted.
func shownURL(u string) string {
	if u == "" {
		return ""
	}
	p, err := url.Parse(u)
	if err != nil {
		return Redacted
	}
	user, query, frag := p.User != nil, p.RawQuery != "" || p.ForceQuery, p.Fragment != "" || p.RawFragment != ""
	p.User, p.RawQuery, p.ForceQuery, p.Fragment, p.RawFragment = nil, "", false, "", ""
	out := p.String()
	if user {
		if scheme, rest, ok := strings.Cut(out, "://"); ok {
			out = scheme + "://" + Redacted + "@" + rest
		} else {
			return Redacted
		}
	}
	if query {
		out += "?" + Redacted
	}
	if frag {
		out += "#" + Redacted
	}
	return out
}
