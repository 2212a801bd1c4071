package tool_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func FuzzNewCall(f *testing.F) {
	for _, s := range []string{"", "{}", `{"a":1}`, " \n{\"path\":\"x\"} ", "[]", "null", "{", "\"s\"", "{\"a\":\"\xff\"}",
		`{"a":"` + strings.Repeat("x", bound.MaxToolArgumentsBytes) + `"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		in := bytes.Clone(args)
		c, err := tool.NewCall("c1", "read", args)
		if err != nil {
			var be *bound.Error
			if !errors.As(err, &be) {
				t.Fatalf("untyped error %T", err)
			}
			if len(args) > bound.MaxToolArgumentsBytes && be.Rule != bound.TooLarge {
				t.Fatalf("oversized arguments: rule %v, want TooLarge", be.Rule)
			}
			if !c.IsZero() {
				t.Fatal("error with a non-zero call")
			}
			return
		}
		if len(args) > bound.MaxToolArgumentsBytes {
			t.Fatal("accepted oversized arguments")
		}
		got := c.Arguments()
		if len(in) == 0 {
			if string(got) != "{}" {
				t.Fatalf("empty arguments became %q", got)
			}
			return
		}
		if !bytes.Equal(got, in) {
			t.Fatal("arguments do not round-trip")
		}
		if !json.Valid(got) || !utf8.Valid(got) {
			t.Fatal("accepted invalid JSON or UTF-8")
		}
		var obj map[string]json.RawMessage
		if json.Unmarshal(got, &obj) != nil {
			t.Fatal("accepted a non-object")
		}
		got[0] ^= 0xff
		if !bytes.Equal(c.Arguments(), in) {
			t.Fatal("Arguments handed out internal state")
		}
	})
}

func FuzzNewDefinition(f *testing.F) {
	for _, s := range []string{"", "{}", `{"type":"object"}`, " { \"type\" : \"object\" } ", "[]", "{", "{\"a\":\"\xff\"}", "1"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		d, err := tool.NewDefinition(tool.DefinitionConfig{Name: "t", Effect: tool.ReadOnly, Replay: tool.Safe, Schema: schema})
		if err != nil {
			var be *bound.Error
			if !errors.As(err, &be) || be.Field != "tool.schema" {
				t.Fatalf("want a *bound.Error for tool.schema, got %v", err)
			}
			if len(schema) > bound.MaxSchemaBytes && be.Rule != bound.TooLarge {
				t.Fatalf("oversized schema: rule %v, want TooLarge", be.Rule)
			}
			return
		}
		if len(schema) > bound.MaxSchemaBytes {
			t.Fatal("accepted an oversized schema")
		}
		got := d.Schema()
		var obj map[string]json.RawMessage
		if !utf8.Valid(got) || json.Unmarshal(got, &obj) != nil {
			t.Fatal("stored schema is not a UTF-8 JSON object")
		}
		if len(schema) > 0 {
			var want bytes.Buffer
			if json.Compact(&want, schema) != nil || !bytes.Equal(want.Bytes(), got) {
				t.Fatal("schema is not the compact form of the input")
			}
		}
		// Compacting is idempotent, so the fingerprint is too.
		d2, err := tool.NewDefinition(tool.DefinitionConfig{Name: "t", Effect: tool.ReadOnly, Replay: tool.Safe, Schema: got})
		if err != nil || d2.Fingerprint() != d.Fingerprint() {
			t.Fatal("re-defining from the stored schema changed the fingerprint")
		}
	})
}
