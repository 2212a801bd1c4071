package tool_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

func TestK4_ValidCombinations(t *testing.T) {
	for _, cfg := range []tool.DefinitionConfig{
		{Name: "read", Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{tool.FilesystemRead, tool.EnvironmentRead}},
		{Name: "put", Effect: tool.Mutating, Replay: tool.Idempotent, Capabilities: []tool.Capability{tool.FilesystemWrite}},
		{Name: "exec", Effect: tool.Mutating, Replay: tool.Unsafe, Capabilities: []tool.Capability{tool.ProcessExecute, tool.Network}},
	} {
		d, err := tool.NewDefinition(cfg)
		require.NoError(t, err, cfg.Name)
		require.Equal(t, cfg.Effect, d.Effect())
		require.Equal(t, cfg.Replay, d.Replay())
	}
}

func TestK4_ContradictionsFailAtConstruction(t *testing.T) {
	cases := []struct {
		name  string
		cfg   tool.DefinitionConfig
		field string
		rule  bound.Rule
	}{
		{"read-only idempotent", tool.DefinitionConfig{Effect: tool.ReadOnly, Replay: tool.Idempotent}, "tool.replay", bound.Conflict},
		{"read-only unsafe", tool.DefinitionConfig{Effect: tool.ReadOnly, Replay: tool.Unsafe}, "tool.replay", bound.Conflict},
		{"mutating safe", tool.DefinitionConfig{Effect: tool.Mutating, Replay: tool.Safe}, "tool.replay", bound.Conflict},
		{"read-only fs.write", tool.DefinitionConfig{Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{tool.FilesystemWrite}}, "tool.capabilities", bound.Conflict},
		{"read-only process.execute", tool.DefinitionConfig{Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{tool.ProcessExecute}}, "tool.capabilities", bound.Conflict},
		{"read-only network", tool.DefinitionConfig{Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{tool.FilesystemRead, tool.Network}}, "tool.capabilities", bound.Conflict},
		{"read-only env.write", tool.DefinitionConfig{Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{tool.EnvironmentWrite}}, "tool.capabilities", bound.Conflict},
		{"missing effect", tool.DefinitionConfig{Replay: tool.Safe}, "tool.effect", bound.Required},
		{"missing replay", tool.DefinitionConfig{Effect: tool.ReadOnly}, "tool.replay", bound.Required},
		{"unknown effect", tool.DefinitionConfig{Effect: 9, Replay: tool.Safe}, "tool.effect", bound.Malformed},
		{"unknown replay", tool.DefinitionConfig{Effect: tool.Mutating, Replay: 9}, "tool.replay", bound.Malformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.Name = "t"
			d, err := tool.NewDefinition(tc.cfg)
			require.True(t, d.IsZero())
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
		})
	}
}

func TestK4_ReadOnlyRejectsMutatingCapability(t *testing.T) {
	for _, c := range []tool.Capability{tool.FilesystemWrite, tool.ProcessExecute, tool.Network, tool.EnvironmentWrite} {
		require.True(t, c.CanMutate(), c)
		_, err := tool.NewDefinition(tool.DefinitionConfig{Name: "r", Effect: tool.ReadOnly, Replay: tool.Safe, Capabilities: []tool.Capability{c}})
		require.ErrorIs(t, err, bound.ErrInvalid, c)
		// The same capability is fine on a mutating tool.
		_, err = tool.NewDefinition(tool.DefinitionConfig{Name: "m", Effect: tool.Mutating, Replay: tool.Unsafe, Capabilities: []tool.Capability{c}})
		require.NoError(t, err, c)
	}
	for _, c := range []tool.Capability{tool.FilesystemRead, tool.EnvironmentRead, "search.index"} {
		require.False(t, c.CanMutate(), c)
	}
}

func TestK2_DefinitionBounds(t *testing.T) {
	base := func() tool.DefinitionConfig {
		return tool.DefinitionConfig{Name: "t", Effect: tool.Mutating, Replay: tool.Unsafe}
	}
	cases := []struct {
		name  string
		edit  func(*tool.DefinitionConfig)
		field string
		rule  bound.Rule
	}{
		{"name too long", func(c *tool.DefinitionConfig) { c.Name = strings.Repeat("a", bound.MaxNameBytes+1) }, "tool.name", bound.TooLarge},
		{"name missing", func(c *tool.DefinitionConfig) { c.Name = "" }, "tool.name", bound.Required},
		{"description too long", func(c *tool.DefinitionConfig) { c.Description = strings.Repeat("d", bound.MaxDescriptionBytes+1) }, "tool.description", bound.TooLarge},
		{"schema too long", func(c *tool.DefinitionConfig) {
			c.Schema = json.RawMessage(`{"x":"` + strings.Repeat("s", bound.MaxSchemaBytes) + `"}`)
		}, "tool.schema", bound.TooLarge},
		{"schema not an object", func(c *tool.DefinitionConfig) { c.Schema = json.RawMessage(`[1]`) }, "tool.schema", bound.Malformed},
		{"schema not JSON", func(c *tool.DefinitionConfig) { c.Schema = json.RawMessage(`{`) }, "tool.schema", bound.Malformed},
		{"schema not UTF-8", func(c *tool.DefinitionConfig) { c.Schema = json.RawMessage("{\"a\":\"\xff\"}") }, "tool.schema", bound.Malformed},
		{"too many capabilities", func(c *tool.DefinitionConfig) {
			for i := range bound.MaxCapabilities + 1 {
				c.Capabilities = append(c.Capabilities, tool.Capability("cap"+string(rune('a'+i))))
			}
		}, "tool.capabilities", bound.TooMany},
		{"duplicate capability", func(c *tool.DefinitionConfig) {
			c.Capabilities = []tool.Capability{tool.Network, tool.FilesystemWrite, tool.Network}
		}, "tool.capabilities", bound.Malformed},
		{"bad capability name", func(c *tool.DefinitionConfig) { c.Capabilities = []tool.Capability{"Bad Cap"} }, "tool.capabilities", bound.Malformed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			_, err := tool.NewDefinition(cfg)
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, tc.field, be.Field)
			require.Equal(t, tc.rule, be.Rule)
		})
	}
}

func TestK5_CapabilitiesCanonicalOrder(t *testing.T) {
	in := []tool.Capability{tool.Network, tool.FilesystemWrite, "search.index", tool.EnvironmentWrite, tool.FilesystemRead}
	d, err := tool.NewDefinition(tool.DefinitionConfig{Name: "t", Effect: tool.Mutating, Replay: tool.Unsafe, Capabilities: in})
	require.NoError(t, err)
	got := slices.Collect(d.Capabilities())
	require.Equal(t, []tool.Capability{tool.EnvironmentWrite, tool.FilesystemRead, tool.FilesystemWrite, tool.Network, "search.index"}, got)
	require.True(t, slices.IsSorted(got))
	require.True(t, d.HasCapability(tool.Network))
	require.False(t, d.HasCapability(tool.ProcessExecute))
	// The caller's slice is not reordered.
	require.Equal(t, tool.Network, in[0])
}

func TestK5_FingerprintStableAndCoversEveryField(t *testing.T) {
	base := tool.DefinitionConfig{
		Name:         "write_file",
		Description:  "writes a file",
		Schema:       json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`),
		Effect:       tool.Mutating,
		Replay:       tool.Idempotent,
		Capabilities: []tool.Capability{tool.FilesystemWrite, tool.FilesystemRead},
	}
	fp := func(cfg tool.DefinitionConfig) tool.Fingerprint {
		d, err := tool.NewDefinition(cfg)
		require.NoError(t, err)
		return d.Fingerprint()
	}
	want := fp(base)
	require.Equal(t, want, fp(base), "same input, same fingerprint")
	// Golden value, recomputed independently from the documented layout
	// (length-prefixed fields after the domain); changing the encoding must
	// be a deliberate version bump.
	require.Equal(t, "b4a17424b58ac92fe43204a1288128519300e9d05a307b4d81f627ac235528fc", want.String())

	// Permuted capabilities and insignificant schema whitespace do not matter.
	perm := base
	perm.Capabilities = []tool.Capability{tool.FilesystemRead, tool.FilesystemWrite}
	perm.Schema = json.RawMessage("{ \"type\" : \"object\",\n \"properties\": {\"path\": {\"type\": \"string\"}} }")
	require.Equal(t, want, fp(perm))

	edits := map[string]func(*tool.DefinitionConfig){
		"name":        func(c *tool.DefinitionConfig) { c.Name = "write_file2" },
		"description": func(c *tool.DefinitionConfig) { c.Description = "writes a file!" },
		"schema":      func(c *tool.DefinitionConfig) { c.Schema = json.RawMessage(`{"type":"object"}`) },
		"effect": func(c *tool.DefinitionConfig) {
			c.Effect, c.Replay, c.Capabilities = tool.ReadOnly, tool.Safe, []tool.Capability{tool.FilesystemRead}
		},
		"replay":           func(c *tool.DefinitionConfig) { c.Replay = tool.Unsafe },
		"capability added": func(c *tool.DefinitionConfig) { c.Capabilities = append(slices.Clone(c.Capabilities), tool.Network) },
		"capability removed": func(c *tool.DefinitionConfig) {
			c.Capabilities = []tool.Capability{tool.FilesystemWrite}
		},
		// Length prefixes keep "ab"+"c" apart from "a"+"bc".
		"boundary shift": func(c *tool.DefinitionConfig) { c.Name, c.Description = "write_filew", "rites a file" },
	}
	seen := map[tool.Fingerprint]string{want: "base"}
	for name, edit := range edits {
		cfg := base
		edit(&cfg)
		got := fp(cfg)
		require.NotEqual(t, want, got, name)
		prev, dup := seen[got]
		require.False(t, dup, "%s collides with %s", name, prev)
		seen[got] = name
	}
	// Effect alone (same replay and capabilities) also changes it.
	ro := fp(tool.DefinitionConfig{Name: "x", Effect: tool.ReadOnly, Replay: tool.Safe})
	_, err := tool.NewDefinition(tool.DefinitionConfig{Name: "x", Effect: tool.Mutating, Replay: tool.Safe})
	require.Error(t, err) // mutating+safe is a contradiction, so effect and replay never alias
	require.NotEqual(t, ro, fp(tool.DefinitionConfig{Name: "x", Effect: tool.Mutating, Replay: tool.Idempotent}))
}

func TestK1_ValuesImmutable(t *testing.T) {
	t.Run("definition", func(t *testing.T) {
		caps := []tool.Capability{tool.FilesystemRead, tool.FilesystemWrite}
		schema := []byte(`{"type":"object"}`)
		d, err := tool.NewDefinition(tool.DefinitionConfig{Name: "t", Effect: tool.Mutating, Replay: tool.Unsafe, Schema: schema, Capabilities: caps})
		require.NoError(t, err)
		fp := d.Fingerprint()
		caps[0], caps[1] = tool.Network, tool.ProcessExecute
		schema[2] = 'X'
		s := d.Schema()
		s[2] = 'Y'
		require.Equal(t, `{"type":"object"}`, string(d.Schema()))
		require.Equal(t, []tool.Capability{tool.FilesystemRead, tool.FilesystemWrite}, slices.Collect(d.Capabilities()))
		require.Equal(t, fp, d.Fingerprint())
		// Stopping the capability iterator early is safe.
		for range d.Capabilities() {
			break
		}
	})
	t.Run("call", func(t *testing.T) {
		args := []byte(`{"path":"a"}`)
		c, err := tool.NewCall("c1", "read", args)
		require.NoError(t, err)
		args[2] = 'X'
		a := c.Arguments()
		a[2] = 'Y'
		require.Equal(t, `{"path":"a"}`, string(c.Arguments()))
		require.Equal(t, `{"path":"a"}`, c.ArgumentsString())
	})
	t.Run("result", func(t *testing.T) {
		content := []byte("hello")
		r, err := tool.NewProblemResult("c1", prob("not_found"), string(content))
		require.NoError(t, err)
		content[0] = 'J'
		p, ok := r.Problem()
		require.True(t, ok)
		require.Equal(t, "not_found", p.Code())
		require.Equal(t, "hello", r.Content())
	})
	t.Run("execution error", func(t *testing.T) {
		// No exported fields: only constructor input shapes the value.
		cfg := tool.ExecutionErrorConfig{CallID: "c1", Outcome: tool.Definitive, Problem: prob("io")}
		e, err := tool.NewExecutionError(cfg)
		require.NoError(t, err)
		cfg.CallID, cfg.Outcome = "c2", tool.Uncertain
		require.Equal(t, "c1", string(e.CallID()))
		require.Equal(t, tool.Definitive, e.Outcome())
	})
}
