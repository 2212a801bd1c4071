package spec

import (
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/providers/scripted"
)

var (
	stepFields  = []string{"match", "text", "calls", "usage"}
	callFields  = []string{"name", "arguments"}
	usageFields = []string{"input", "output"}
)

// script reads an inline script: a list of steps in the scripted
// provider's form (see providers/scripted), with each call's arguments
// written as a YAML mapping. Each step is validated by the scripted
// package, and its mistakes are reported at the step's line.
func (d *decoder) script(n *yaml.Node, path string) (scripted.Script, []CallSite, error) {
	var s scripted.Script
	items, err := d.list(n, path)
	if err != nil {
		return s, nil, err
	}
	if len(items) == 0 {
		return s, nil, d.fail(n, path, "a script needs at least one step")
	}
	if err := bound.Count(path, len(items), scripted.MaxSteps); err != nil {
		return s, nil, d.bound(n, "", err)
	}
	s.Steps = make([]scripted.Step, len(items))
	var sites []CallSite
	for i, item := range items {
		sp := path + "[" + strconv.Itoa(i) + "]"
		st, err := d.step(item, sp)
		if err != nil {
			return s, nil, err
		}
		if o, ok := stepCalls(item); ok {
			for j, c := range o.Content {
				sites = append(sites, CallSite{Step: i, Call: j, Field: sp + ".calls[" + strconv.Itoa(j) + "]", Line: c.Line})
			}
		}
		// The scripted package's own check, one step at a time so that
		// its field path can be moved to this step.
		if err := (scripted.Script{Steps: []scripted.Step{st}}).Validate(); err != nil {
			var be *bound.Error
			if errors.As(err, &be) {
				moved := *be
				moved.Field = sp + strings.TrimPrefix(be.Field, "script.steps[0]")
				err = &moved
			}
			return s, nil, d.bound(item, sp, err)
		}
		s.Steps[i] = st
	}
	return s, sites, nil
}

// stepCalls returns the calls list of a decoded step's node.
func stepCalls(step *yaml.Node) (*yaml.Node, bool) {
	for i := 0; i+1 < len(step.Content); i += 2 {
		if step.Content[i].Value == "calls" && step.Content[i+1].Kind == yaml.SequenceNode {
			return step.Content[i+1], true
		}
	}
	return nil, false
}

func (d *decoder) step(n *yaml.Node, path string) (scripted.Step, error) {
	var st scripted.Step
	o, err := d.object(n, path, stepFields...)
	if err != nil {
		return st, err
	}
	if st.Match, err = d.str(o, "match", false, scripted.MaxMatchBytes); err != nil {
		return st, err
	}
	if st.Text, err = d.str(o, "text", false, bound.MaxTextPerOperation); err != nil {
		return st, err
	}
	if v, ok := o.values["calls"]; ok {
		calls, err := d.list(v, join(path, "calls"))
		if err != nil {
			return st, err
		}
		if err := bound.Count(join(path, "calls"), len(calls), bound.MaxToolCallsPerOperation); err != nil {
			return st, d.bound(v, "", err)
		}
		for j, c := range calls {
			cs, err := d.call(c, join(path, "calls")+"["+strconv.Itoa(j)+"]")
			if err != nil {
				return st, err
			}
			st.Calls = append(st.Calls, cs)
		}
	}
	if st.Text == "" && len(st.Calls) == 0 {
		return st, d.fail(n, path, "a step needs text, calls or both")
	}
	if v, ok := o.values["usage"]; ok {
		u, err := d.object(v, join(path, "usage"), usageFields...)
		if err != nil {
			return st, err
		}
		if st.Usage.Input, err = d.integer(u, "input", 0, math.MaxInt32); err != nil {
			return st, err
		}
		if st.Usage.Output, err = d.integer(u, "output", 0, math.MaxInt32); err != nil {
			return st, err
		}
	}
	return st, nil
}

func (d *decoder) call(n *yaml.Node, path string) (scripted.CallSpec, error) {
	var c scripted.CallSpec
	o, err := d.object(n, path, callFields...)
	if err != nil {
		return c, err
	}
	if c.Name, err = d.str(o, "name", true, bound.MaxNameBytes); err != nil {
		return c, err
	}
	v, ok := o.values["arguments"]
	if !ok {
		return c, nil
	}
	if v.Kind != yaml.MappingNode {
		return c, d.fail(v, join(path, "arguments"), "want a mapping of arguments, got "+describe(v))
	}
	raw, err := d.json(v, join(path, "arguments"), nil, 0)
	if err != nil {
		return c, err
	}
	if err := bound.Bytes(join(path, "arguments"), len(raw), bound.MaxToolArgumentsBytes); err != nil {
		return c, d.bound(v, "", err)
	}
	c.Arguments = raw
	return c, nil
}

// json appends the JSON form of a YAML value: mappings (string keys, in
// their written order) become objects, lists arrays, and scalars strings,
// numbers, booleans or null by their resolved YAML type.
func (d *decoder) json(n *yaml.Node, path string, dst []byte, depth int) ([]byte, error) {
	if depth > MaxJSONDepth {
		return nil, d.fail(n, path, "nested deeper than "+strconv.Itoa(MaxJSONDepth)+" levels")
	}
	switch n.Kind {
	case yaml.MappingNode:
		dst = append(dst, '{')
		seen := make(map[string]bool, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
				return nil, d.fail(k, path, "argument names must be strings")
			}
			if seen[k.Value] {
				return nil, d.fail(k, path, "argument given twice")
			}
			seen[k.Value] = true
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSONString(dst, k.Value)
			dst = append(dst, ':')
			var err error
			if dst, err = d.json(v, path, dst, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	case yaml.SequenceNode:
		dst = append(dst, '[')
		for i, v := range n.Content {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = d.json(v, path, dst, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case yaml.ScalarNode:
		return d.scalarJSON(n, path, dst)
	}
	return nil, d.fail(n, path, "unsupported YAML value")
}

func (d *decoder) scalarJSON(n *yaml.Node, path string, dst []byte) ([]byte, error) {
	switch n.ShortTag() {
	case "!!str":
		return appendJSONString(dst, n.Value), nil
	case "!!null":
		return append(dst, "null"...), nil
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return nil, d.fail(n, path, "not a boolean")
		}
		return strconv.AppendBool(dst, b), nil
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return nil, d.fail(n, path, "integer out of range")
		}
		return strconv.AppendInt(dst, i, 10), nil
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, d.fail(n, path, "not a finite number")
		}
		return strconv.AppendFloat(dst, f, 'g', -1, 64), nil
	}
	return nil, d.fail(n, path, "unsupported YAML type")
}

func appendJSONString(dst []byte, s string) []byte {
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}
