package spec

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// decoder walks a yaml.v3 node tree with strict typing. Every method
// returns the first mistake as an *Error at the offending node's line.
type decoder struct {
	file string
}

func (d *decoder) fail(n *yaml.Node, field, msg string) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return &Error{File: d.file, Line: line, Field: field, Msg: msg}
}

func (d *decoder) bound(n *yaml.Node, field string, err error) *Error {
	line := 0
	if n != nil {
		line = n.Line
	}
	return fromBound(d.file, line, field, err)
}

// object is a mapping node whose keys have been checked: strings, each at
// most once, each one of the known fields.
type object struct {
	node   *yaml.Node
	path   string
	values map[string]*yaml.Node
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) object(n *yaml.Node, path string, known ...string) (*object, error) {
	if n.Kind != yaml.MappingNode {
		return nil, d.fail(n, path, "want a mapping of fields, got "+describe(n))
	}
	o := &object{node: n, path: path, values: make(map[string]*yaml.Node, len(n.Content)/2)}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.ShortTag() != "!!str" {
			return nil, d.fail(k, path, "field names must be strings")
		}
		if !slices.Contains(known, k.Value) {
			return nil, d.fail(k, path, "unknown field "+quoteName(k.Value)+" (known: "+strings.Join(known, ", ")+")")
		}
		if _, dup := o.values[k.Value]; dup {
			return nil, d.fail(k, join(path, k.Value), "field given twice")
		}
		o.values[k.Value] = v
	}
	return o, nil
}

// quoteName quotes a key only when it looks like a field name, so that a
// value pasted where a key belongs is not echoed.
func quoteName(s string) string {
	if len(s) <= 64 && bound.Name("key", strings.ReplaceAll(s, "-", "_")) == nil {
		return strconv.Quote(s)
	}
	return "(not a field name)"
}

// describe names a node's kind and type for a type mistake.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.ShortTag() {
		case "!!str":
			return "a string"
		case "!!int":
			return "an integer"
		case "!!float":
			return "a number"
		case "!!bool":
			return "a boolean"
		case "!!null":
			return "null"
		}
		return "a value of another type"
	}
	return "something else"
}

func (o *object) has(name string) bool { _, ok := o.values[name]; return ok }

func (o *object) line(name string) *yaml.Node {
	if v, ok := o.values[name]; ok {
		return v
	}
	return o.node
}

// str reads an optional string field; required makes a missing one an
// error. limit bounds its bytes; the text must be valid UTF-8.
func (d *decoder) str(o *object, name string, required bool, limit int) (string, error) {
	field := join(o.path, name)
	v, ok := o.values[name]
	if !ok {
		if required {
			return "", d.fail(o.node, field, "required")
		}
		return "", nil
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return "", d.fail(v, field, "want a string, got "+describe(v))
	}
	if err := bound.OptionalText(field, v.Value, limit); err != nil {
		return "", d.bound(v, field, err)
	}
	if required && v.Value == "" {
		return "", d.fail(v, field, "must not be empty")
	}
	return v.Value, nil
}

// integer reads an optional integer field in [lo, hi]; absent is 0.
func (d *decoder) integer(o *object, name string, lo, hi int64) (int64, error) {
	field := join(o.path, name)
	v, ok := o.values[name]
	if !ok {
		return 0, nil
	}
	if v.Kind == yaml.ScalarNode && v.ShortTag() == "!!float" && digits.MatchString(v.Value) {
		// YAML reads an integer literal too large for 64 bits as a float.
		return 0, d.fail(v, field, "too large for an integer: "+inRange(lo, hi))
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!int" {
		return 0, d.fail(v, field, "want an integer, got "+describe(v))
	}
	var n int64
	if err := v.Decode(&n); err != nil {
		return 0, d.fail(v, field, "too large for an integer: "+inRange(lo, hi))
	}
	if n < lo || n > hi {
		return 0, d.fail(v, field, inRange(lo, hi))
	}
	return n, nil
}

// digits matches an integer literal: a sign and decimal digits, which
// YAML allows to be grouped with underscores.
var digits = regexp.MustCompile(`^[-+]?[0-9][0-9_]*$`)

// inRange says what values a field takes: "must be 1", "must be between 1
// and 64".
func inRange(lo, hi int64) string {
	if lo == hi {
		return "must be " + strconv.FormatInt(lo, 10)
	}
	return "must be between " + strconv.FormatInt(lo, 10) + " and " + strconv.FormatInt(hi, 10)
}

// number reads an optional number in [lo, hi]; absent is nil.
func (d *decoder) number(o *object, name string, lo, hi float64) (*float64, error) {
	field := join(o.path, name)
	v, ok := o.values[name]
	if !ok {
		return nil, nil
	}
	if v.Kind != yaml.ScalarNode || (v.ShortTag() != "!!float" && v.ShortTag() != "!!int") {
		return nil, d.fail(v, field, "want a number, got "+describe(v))
	}
	var f float64
	if err := v.Decode(&f); err != nil || math.IsNaN(f) || f < lo || f > hi {
		return nil, d.fail(v, field, "must be a number between "+strconv.FormatFloat(lo, 'g', -1, 64)+
			" and "+strconv.FormatFloat(hi, 'g', -1, 64))
	}
	return &f, nil
}

// duration reads an optional Go duration ("90s", "2m") in (0, hi].
func (d *decoder) duration(o *object, name string, hi time.Duration) (time.Duration, error) {
	field := join(o.path, name)
	v, ok := o.values[name]
	if !ok {
		return 0, nil
	}
	if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" {
		return 0, d.fail(v, field, "want a duration such as \"90s\" or \"2m\", got "+describe(v))
	}
	t, err := time.ParseDuration(v.Value)
	if err != nil {
		return 0, d.fail(v, field, "want a duration such as \"90s\" or \"2m\"")
	}
	if t <= 0 || t > hi {
		return 0, d.fail(v, field, "must be positive and at most "+hi.String())
	}
	return t, nil
}

// enum reads an optional string field that must be one of choices.
func (d *decoder) enum(o *object, name string, required bool, choices ...string) (string, error) {
	s, err := d.str(o, name, required, 64)
	if err != nil || (s == "" && !required) {
		return s, err
	}
	if !slices.Contains(choices, s) {
		return "", d.fail(o.line(name), join(o.path, name), "must be one of "+strings.Join(choices, ", "))
	}
	return s, nil
}

// list checks that n is a sequence.
func (d *decoder) list(n *yaml.Node, field string) ([]*yaml.Node, error) {
	if n.Kind != yaml.SequenceNode {
		return nil, d.fail(n, field, "want a list, got "+describe(n))
	}
	return n.Content, nil
}

// plain refuses anchors, aliases and merge keys anywhere in the tree: a
// spec reads top to bottom, and aliases are how small YAML inputs grow
// into large values. The walk is iterative; the parser bounds the depth.
func (d *decoder) plain(root *yaml.Node) error {
	stack := []*yaml.Node{root}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if n.Kind == yaml.AliasNode || n.Anchor != "" {
			return d.fail(n, "", "anchors and aliases are not supported")
		}
		if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!merge" {
			return d.fail(n, "", "merge keys are not supported")
		}
		stack = append(stack, n.Content...)
	}
	return nil
}
