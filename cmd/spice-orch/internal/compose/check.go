package compose

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/tools"
)

// Check reports what Build would refuse in s, or what its tools would
// refuse later, without building anything: a scripted call of a tool the
// plan does not have, or with arguments its schema refuses. Each mistake
// is a *spec.Error at the call's line. A spec with plugins or MCP servers
// is checked when they are started, since only they name their tools.
func Check(s spec.Spec) error {
	if len(s.Plugins) > 0 || len(s.MCPServers) > 0 {
		return nil
	}
	defs, err := definitions()
	if err != nil {
		return err
	}
	for i, w := range s.Workers {
		if w.Provider == spec.Scripted {
			if err := checkCalls(s.File, workerField(i), w, defs); err != nil {
				return err
			}
		}
	}
	return nil
}

// definitions are the plan's tool definitions by name. Only their
// contracts are read; the root the tools are built on is never touched.
func definitions() (map[string]tool.Definition, error) {
	ts, err := tools.New(tools.Config{Root: "/"})
	if err != nil {
		return nil, err
	}
	defs := make(map[string]tool.Definition, len(ts))
	for _, t := range ts {
		defs[t.Definition().Name()] = t.Definition()
	}
	return defs, nil
}

// checkCalls checks every call of w's script against the plan's tools.
func checkCalls(file, field string, w spec.Worker, defs map[string]tool.Definition) error {
	sites := w.Calls
	n := 0
	for si, st := range w.Script.Steps {
		for ci, c := range st.Calls {
			site := spec.CallSite{Step: si, Call: ci, Field: field + ".script[" + strconv.Itoa(si) + "].calls[" + strconv.Itoa(ci) + "]"}
			if n < len(sites) && sites[n].Step == si && sites[n].Call == ci {
				site = sites[n]
			}
			n++
			def, ok := defs[c.Name]
			if !ok {
				names := slices.Sorted(func(yield func(string) bool) {
					for k := range defs {
						if !yield(k) {
							return
						}
					}
				})
				return &spec.Error{File: file, Line: site.Line, Field: site.Field + ".name",
					Msg: "calls the tool " + c.Name + ", which the plan does not have (it has " + strings.Join(names, ", ") + ")",
					Err: &ConfigError{bound.Malformedf(site.Field+".name", "unknown tool")}}
			}
			if msg := checkArguments(def, c.Arguments); msg != "" {
				return &spec.Error{File: file, Line: site.Line, Field: site.Field + ".arguments", Msg: msg,
					Err: &ConfigError{bound.Malformedf(site.Field+".arguments", "refused by the tool's schema")}}
			}
		}
	}
	return nil
}

// schema is the part of JSON Schema the compiled tools' argument schemas
// use: an object, its properties' types, the required ones, and whether
// others are allowed.
type schema struct {
	Type       string `json:"type"`
	Properties map[string]struct {
		Type string `json:"type"`
	} `json:"properties"`
	Required             []string `json:"required"`
	AdditionalProperties *bool    `json:"additionalProperties"`
}

// checkArguments returns what def's schema refuses in args (a JSON object,
// or empty for none), or "".
func checkArguments(def tool.Definition, args json.RawMessage) string {
	var sc schema
	if err := json.Unmarshal(def.Schema(), &sc); err != nil || sc.Type != "object" {
		return "" // a schema this check does not read: the tool decides
	}
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(args, &got); err != nil {
		return "the arguments of " + def.Name() + " must be a mapping"
	}
	for _, name := range sc.Required {
		if _, ok := got[name]; !ok {
			return def.Name() + " needs the argument " + name
		}
	}
	known := slices.Sorted(func(yield func(string) bool) {
		for k := range sc.Properties {
			if !yield(k) {
				return
			}
		}
	})
	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range got {
			if !yield(k) {
				return
			}
		}
	}) {
		p, ok := sc.Properties[name]
		if !ok {
			if sc.AdditionalProperties != nil && !*sc.AdditionalProperties {
				shown := "an unknown argument"
				if bound.Name("argument", name) == nil {
					shown = "the unknown argument " + name
				}
				return def.Name() + " has no such argument: " + shown + " (it takes " + strings.Join(known, ", ") + ")"
			}
			continue
		}
		if p.Type != "" && !jsonType(got[name], p.Type) {
			return "the argument " + name + " of " + def.Name() + " must be " + article(p.Type)
		}
	}
	return ""
}

// jsonType reports whether v is a JSON value of the schema type t.
func jsonType(v json.RawMessage, t string) bool {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return false
	}
	switch t {
	case "string":
		return v[0] == '"'
	case "boolean":
		return string(v) == "true" || string(v) == "false"
	case "null":
		return string(v) == "null"
	case "object":
		return v[0] == '{'
	case "array":
		return v[0] == '['
	case "number":
		return v[0] == '-' || v[0] >= '0' && v[0] <= '9'
	case "integer":
		return (v[0] == '-' || v[0] >= '0' && v[0] <= '9') && !bytes.ContainsAny(v, ".eE")
	}
	return true
}

func article(t string) string {
	if t == "object" || t == "array" || t == "integer" {
		return "an " + t
	}
	return "a " + t
}
