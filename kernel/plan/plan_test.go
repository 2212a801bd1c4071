package plan_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"iter"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/plan"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// cloneConfigs deep-copies cfgs so a mutation touches one variant only.
func cloneConfigs(cfgs []tool.DefinitionConfig) []tool.DefinitionConfig {
	out := slices.Clone(cfgs)
	for i := range out {
		out[i].Schema = slices.Clone(out[i].Schema)
		out[i].Capabilities = slices.Clone(out[i].Capabilities)
	}
	return out
}

func TestK11_FingerprintCoversCompleteContracts(t *testing.T) {
	base := baseConfigs()
	baseFP := newPlan(t, "plan-base", base).Fingerprint()

	// Each mutation changes one field class of one tool. Effect and replay
	// are tied by K4 (read-only ⇔ safe), so an effect change carries the
	// replay (and capability) change that keeps the definition valid.
	mutations := map[string]func(c *tool.DefinitionConfig) bool{
		"name":        func(c *tool.DefinitionConfig) bool { c.Name += "_v2"; return true },
		"description": func(c *tool.DefinitionConfig) bool { c.Description += " Carefully."; return true },
		"schema": func(c *tool.DefinitionConfig) bool {
			c.Schema = json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
			return true
		},
		"replay": func(c *tool.DefinitionConfig) bool {
			switch c.Replay {
			case tool.Idempotent:
				c.Replay = tool.Unsafe
			case tool.Unsafe:
				c.Replay = tool.Idempotent
			default:
				return false // a read-only tool must stay safe
			}
			return true
		},
		"effect": func(c *tool.DefinitionConfig) bool {
			if c.Effect == tool.ReadOnly {
				c.Effect, c.Replay = tool.Mutating, tool.Idempotent
				return true
			}
			c.Effect, c.Replay = tool.ReadOnly, tool.Safe
			c.Capabilities = slices.DeleteFunc(c.Capabilities, tool.Capability.CanMutate)
			return true
		},
		"capability added": func(c *tool.DefinitionConfig) bool {
			if c.Effect == tool.ReadOnly {
				c.Capabilities = append(c.Capabilities, tool.EnvironmentRead)
			} else {
				c.Capabilities = append(c.Capabilities, tool.Network)
			}
			return true
		},
		"capability removed": func(c *tool.DefinitionConfig) bool {
			c.Capabilities = c.Capabilities[1:]
			return true
		},
		"capability renamed": func(c *tool.DefinitionConfig) bool {
			c.Capabilities[0] = "custom.power"
			return true
		},
	}

	seen := map[plan.Fingerprint]string{baseFP: "base"}
	tried := 0
	for i := range base {
		for what, mutate := range mutations {
			cfgs := cloneConfigs(base)
			if !mutate(&cfgs[i]) {
				continue
			}
			label := base[i].Name + ": " + what
			fp := newPlan(t, "plan-variant", cfgs).Fingerprint()
			prev, dup := seen[fp]
			require.False(t, dup, "%s has the same plan fingerprint as %s", label, prev)
			seen[fp] = label
			tried++
		}
	}
	require.Equal(t, len(base)*len(mutations)-1, tried, "only the read-only replay mutation is impossible")

	// Dropping a tool, and the empty plan, change it too.
	for _, cfgs := range [][]tool.DefinitionConfig{base[1:], nil} {
		fp := newPlan(t, "plan-smaller", cfgs).Fingerprint()
		_, dup := seen[fp]
		require.False(t, dup)
		seen[fp] = "smaller"
	}

	// Registration order does not matter: the plan sorts by name.
	reversed := slices.Clone(base)
	slices.Reverse(reversed)
	rotated := append(slices.Clone(base[1:]), base[0])
	for _, cfgs := range [][]tool.DefinitionConfig{reversed, rotated} {
		p := newPlan(t, "plan-reordered", cfgs)
		require.Equal(t, baseFP, p.Fingerprint())
		require.Equal(t, []string{"read_file", "run", "write_file"}, names(p))
	}

	// The fingerprint is about tools, the ID is about naming: the same tools
	// under another ID share the fingerprint but not the identity.
	other := newPlan(t, "plan-other-name", base)
	require.Equal(t, baseFP, other.Fingerprint())
	require.NotEqual(t, newPlan(t, "plan-base", base).Identity(), other.Identity())
}

// TestK11_FingerprintLayout pins the published layout: domain, count and
// each tool fingerprint in name order, all length-prefixed. A change here
// breaks every stored snapshot identity, so it must be deliberate.
func TestK11_FingerprintLayout(t *testing.T) {
	p := newPlan(t, "plan-layout", baseConfigs())

	h := sha256.New()
	put := func(b []byte) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	put([]byte("spice-orch/plan.Plan/v1"))
	h.Write(binary.BigEndian.AppendUint64(nil, uint64(p.Len())))
	for d := range p.Definitions() {
		fp := d.Fingerprint()
		put(fp[:])
	}
	var want plan.Fingerprint
	h.Sum(want[:0])
	require.Equal(t, want, p.Fingerprint())
	require.Equal(t, want.String(), p.Fingerprint().String())
	require.Len(t, p.Fingerprint().String(), 64)
}

func TestK11_PlanImmutable(t *testing.T) {
	d := dispatcherOf(t, baseConfigs())
	p, err := plan.New("plan-1", d)
	require.NoError(t, err)
	before := collect(p)
	fp := p.Fingerprint()

	// Changing what the dispatcher was built from does not reach the plan.
	replacement := defsOf(t, []tool.DefinitionConfig{{Name: "evil", Effect: tool.Mutating, Replay: tool.Unsafe}})
	d.defs[0] = replacement[0]
	d.defs = append(d.defs, replacement[0])
	require.Equal(t, before, collect(p))
	require.Equal(t, fp, p.Fingerprint())
	require.Equal(t, 3, p.Len())

	// Accessors hand out values: a collected slice is the caller's own.
	got := collect(p)
	got[0] = replacement[0]
	require.Equal(t, before, collect(p))

	// Stopping an iteration early is safe and leaves the plan intact.
	for range p.Definitions() {
		break
	}
	require.Equal(t, before, collect(p))

	// A copy is the same plan.
	q := p
	require.Equal(t, p.Identity(), q.Identity())
	require.Same(t, d, p.Dispatcher())
	require.Equal(t, plan.ID("plan-1"), p.ID())

	def, ok := p.Lookup("run")
	require.True(t, ok)
	require.Equal(t, "run", def.Name())
	_, ok = p.Lookup("evil")
	require.False(t, ok)

	var zero plan.Plan
	require.True(t, zero.IsZero())
	require.Zero(t, zero.Len())
	require.Empty(t, collect(zero))
	require.Nil(t, zero.Dispatcher())
	require.True(t, zero.Fingerprint().IsZero())
}

type panicDispatcher struct{ *fakeDispatcher }

func (panicDispatcher) Definitions() iter.Seq[tool.Definition] { panic("secret-token") }

type liarDispatcher struct{ *fakeDispatcher }

func (liarDispatcher) Lookup(string) (tool.Definition, bool) { return tool.Definition{}, false }

type endlessDispatcher struct {
	*fakeDispatcher
	def tool.Definition
}

func (e endlessDispatcher) Definitions() iter.Seq[tool.Definition] {
	return func(yield func(tool.Definition) bool) {
		for yield(e.def) {
		}
	}
}

func TestK11_NewRejectsBadPlans(t *testing.T) {
	base := dispatcherOf(t, baseConfigs())
	dup := &fakeDispatcher{defs: append(slices.Clone(base.defs), base.defs[0])}
	many := make([]tool.DefinitionConfig, bound.MaxToolsPerPlan+1)
	for i := range many {
		many[i] = tool.DefinitionConfig{Name: "t" + strconv.Itoa(i), Effect: tool.ReadOnly, Replay: tool.Safe}
	}
	var nilDispatcher *fakeDispatcher

	cases := []struct {
		name  string
		id    plan.ID
		d     tool.Dispatcher
		field string
		rule  bound.Rule
	}{
		{"empty id", "", base, "plan.id", bound.Required},
		{"bad id", "plan 1", base, "plan.id", bound.Malformed},
		{"long id", plan.ID(strings.Repeat("p", bound.MaxIDBytes+1)), base, "plan.id", bound.TooLarge},
		{"nil dispatcher", "p", nil, "plan.dispatcher", bound.Required},
		{"typed nil dispatcher", "p", nilDispatcher, "plan.dispatcher", bound.Malformed},
		{"panicking dispatcher", "p", panicDispatcher{}, "plan.dispatcher", bound.Malformed},
		{"duplicate names", "p", dup, "plan.definitions", bound.Malformed},
		{"zero definition", "p", &fakeDispatcher{defs: []tool.Definition{{}}}, "plan.definitions[0]", bound.Malformed},
		{"lookup disagrees", "p", liarDispatcher{base}, "plan.definitions", bound.Conflict},
		{"too many tools", "p", dispatcherOf(t, many), "plan.definitions", bound.TooMany},
		{"endless tools", "p", endlessDispatcher{def: base.defs[0]}, "plan.definitions", bound.TooMany},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p, err := plan.New(c.id, c.d)
			require.ErrorIs(t, err, bound.ErrInvalid)
			var be *bound.Error
			require.ErrorAs(t, err, &be)
			require.Equal(t, c.field, be.Field)
			require.Equal(t, c.rule, be.Rule)
			require.NotContains(t, err.Error(), "secret")
			require.True(t, p.IsZero())
		})
	}

	// Exactly at the limit is fine.
	p, err := plan.New("p", dispatcherOf(t, many[:bound.MaxToolsPerPlan]))
	require.NoError(t, err)
	require.Equal(t, bound.MaxToolsPerPlan, p.Len())
}

func TestK11_MatchesIdentity(t *testing.T) {
	p := newPlan(t, "plan-1", baseConfigs())
	require.NoError(t, p.Matches(p.Identity()))

	// Same ID, different tools: the fingerprint catches it.
	changed := cloneConfigs(baseConfigs())
	changed[0].Description = "Read a file, differently."
	q := newPlan(t, "plan-1", changed)
	err := q.Matches(p.Identity())
	require.ErrorIs(t, err, plan.ErrMismatch)
	var me *plan.MismatchError
	require.ErrorAs(t, err, &me)
	require.Equal(t, p.Identity(), me.Want)
	require.Equal(t, q.Identity(), me.Got)
	require.Contains(t, err.Error(), "fingerprint")

	// Same tools, different ID.
	r := newPlan(t, "plan-2", baseConfigs())
	err = r.Matches(p.Identity())
	require.ErrorAs(t, err, &me)
	require.Contains(t, err.Error(), "ID mismatch")

	// An invalid expectation is a validation error, not a mismatch.
	err = p.Matches(plan.Identity{ID: "plan-1"})
	require.ErrorIs(t, err, bound.ErrInvalid)
	require.False(t, errors.Is(err, plan.ErrMismatch))
	err = p.Matches(plan.Identity{ID: "bad id!", Fingerprint: p.Fingerprint()})
	require.ErrorIs(t, err, bound.ErrInvalid)
}

func TestK11_IdentityText(t *testing.T) {
	p := newPlan(t, "plan-1", baseConfigs())
	fp, err := plan.ParseFingerprint(p.Fingerprint().String())
	require.NoError(t, err)
	require.Equal(t, p.Fingerprint(), fp)

	b, err := json.Marshal(p.Identity())
	require.NoError(t, err)
	var back plan.Identity
	require.NoError(t, json.Unmarshal(b, &back))
	require.Equal(t, p.Identity(), back)
	require.NoError(t, back.Check())

	for _, bad := range []string{"", "00", strings.ToUpper(fp.String()), strings.Repeat("g", 64), fp.String() + "00"} {
		_, err := plan.ParseFingerprint(bad)
		require.ErrorIs(t, err, bound.ErrInvalid, "%q", bad)
	}
	require.Error(t, json.Unmarshal([]byte(`{"ID":"p","Fingerprint":"zz"}`), &back))

	got, err := plan.ParseID("plan-1")
	require.NoError(t, err)
	require.Equal(t, plan.ID("plan-1"), got)
	_, err = plan.ParseID("plan 1")
	require.ErrorIs(t, err, bound.ErrInvalid)
}

// The fake dispatcher really dispatches through the plan.
func TestK11_PlanDispatcherRuns(t *testing.T) {
	p := newPlan(t, "plan-1", baseConfigs())
	call, err := tool.NewCall("call-1", "run", nil)
	require.NoError(t, err)
	res, err := p.Dispatcher().Dispatch(context.Background(), call, nil)
	require.NoError(t, err)
	require.Equal(t, "ok", res.Content())
}
