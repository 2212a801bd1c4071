package functool

import (
	"encoding/json"
	"reflect"
	"strings"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// maxDepth bounds the nesting of a derived schema.
const maxDepth = 8

// schemaOf derives the JSON schema of an argument struct and the names of
// its required top-level fields.
func schemaOf(t reflect.Type) (json.RawMessage, []string, error) {
	if t.Kind() != reflect.Struct {
		return nil, nil, bound.Malformedf("functool.args", "the argument type must be a struct")
	}
	s, required, err := structSchema(t, 0)
	if err != nil {
		return nil, nil, err
	}
	b, err := json.Marshal(s)
	if err != nil {
		return nil, nil, bound.Malformedf("functool.args", "the schema does not encode")
	}
	return b, required, nil
}

type object = map[string]any

func structSchema(t reflect.Type, depth int) (object, []string, error) {
	props := object{}
	var required []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		if f.Anonymous {
			return nil, nil, bound.Malformedf("functool.args", "embedded fields are not supported")
		}
		name, omit, skip := jsonName(f)
		if skip {
			continue
		}
		ps, err := typeSchema(f.Type, depth+1)
		if err != nil {
			return nil, nil, err
		}
		if d := f.Tag.Get("desc"); d != "" {
			ps["description"] = d
		}
		props[name] = ps
		if !omit && f.Type.Kind() != reflect.Pointer {
			required = append(required, name)
		}
	}
	s := object{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		s["required"] = required
	}
	return s, required, nil
}

func jsonName(f reflect.StructField) (name string, omit, skip bool) {
	tag := f.Tag.Get("json")
	if tag == "-" {
		return "", false, true
	}
	name, opts, _ := strings.Cut(tag, ",")
	if name == "" {
		name = f.Name
	}
	for _, o := range strings.Split(opts, ",") {
		if o == "omitempty" || o == "omitzero" {
			omit = true
		}
	}
	return name, omit, false
}

func typeSchema(t reflect.Type, depth int) (object, error) {
	if depth > maxDepth {
		return nil, bound.Malformedf("functool.args", "the argument type nests too deeply")
	}
	switch t.Kind() {
	case reflect.Pointer:
		return typeSchema(t.Elem(), depth)
	case reflect.String:
		return object{"type": "string"}, nil
	case reflect.Bool:
		return object{"type": "boolean"}, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return object{"type": "integer"}, nil
	case reflect.Float32, reflect.Float64:
		return object{"type": "number"}, nil
	case reflect.Slice, reflect.Array:
		items, err := typeSchema(t.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		return object{"type": "array", "items": items}, nil
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, bound.Malformedf("functool.args", "map keys must be strings")
		}
		v, err := typeSchema(t.Elem(), depth+1)
		if err != nil {
			return nil, err
		}
		return object{"type": "object", "additionalProperties": v}, nil
	case reflect.Struct:
		s, _, err := structSchema(t, depth)
		return s, err
	case reflect.Interface:
		return object{}, nil
	}
	return nil, bound.Malformedf("functool.args", "unsupported argument type "+t.Kind().String())
}

// jsonKind names the JSON type of a Go type for a model-visible message.
func jsonKind(t reflect.Type) string {
	s, err := typeSchema(t, 0)
	if err != nil {
		return "value"
	}
	if k, ok := s["type"].(string); ok {
		return k
	}
	return "value"
}
