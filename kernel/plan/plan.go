package plan

import (
	"cmp"
	"crypto/sha256"
	"encoding/binary"
	"iter"
	"slices"
	"strconv"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// Plan is an immutable set of tool definitions plus the dispatcher that runs
// them (K11). The zero Plan is invalid; use New. Copies of a Plan share the
// same frozen state, so passing one by value is cheap.
type Plan struct {
	p *frozen
}

type frozen struct {
	id          ID
	dispatcher  tool.Dispatcher
	defs        []tool.Definition // sorted by name, unique; never handed out
	fingerprint Fingerprint
}

// New validates planID, reads the dispatcher's definitions once and returns
// the Plan. Later changes to whatever the dispatcher was built from cannot
// reach the Plan.
//
// The definitions are sorted by name, whatever order the dispatcher yields
// them in. New fails with a *bound.Error for a bad ID, a nil dispatcher,
// more than bound.MaxToolsPerPlan definitions, a zero definition, two
// definitions with one name, a Lookup that disagrees with Definitions, or a
// dispatcher that panics while publishing its definitions.
func New(planID ID, d tool.Dispatcher) (Plan, error) {
	if err := id.Check("plan.id", string(planID)); err != nil {
		return Plan{}, err
	}
	if d == nil {
		return Plan{}, bound.Missing("plan.dispatcher")
	}
	defs, err := snapshot(d)
	if err != nil {
		return Plan{}, err
	}
	f := &frozen{id: planID, dispatcher: d, defs: defs}
	f.fingerprint = fingerprint(defs)
	return Plan{p: f}, nil
}

const defsField = "plan.definitions"

// snapshot reads and checks the dispatcher's definitions. The dispatcher is
// foreign code, so a panic in it is contained here.
func snapshot(d tool.Dispatcher) (defs []tool.Definition, err error) {
	defer func() {
		if recover() != nil {
			defs, err = nil, bound.Malformedf("plan.dispatcher", "dispatcher panicked while publishing its definitions")
		}
	}()
	for def := range d.Definitions() {
		if len(defs) == bound.MaxToolsPerPlan {
			// Stop reading: a dispatcher that yields without end must not
			// hold New forever.
			return nil, &bound.Error{Field: defsField, Rule: bound.TooMany,
				Limit: bound.MaxToolsPerPlan, Got: len(defs) + 1, Detail: "reading stopped at the first definition over the limit"}
		}
		if def.IsZero() {
			return nil, bound.Malformedf(defsField+"["+strconv.Itoa(len(defs))+"]", "zero definition")
		}
		defs = append(defs, def)
	}
	slices.SortFunc(defs, func(a, b tool.Definition) int { return cmp.Compare(a.Name(), b.Name()) })
	for i, def := range defs {
		if i > 0 && defs[i-1].Name() == def.Name() {
			return nil, bound.Malformedf(defsField, "two definitions share a tool name")
		}
		got, ok := d.Lookup(def.Name())
		if !ok || got.Fingerprint() != def.Fingerprint() {
			return nil, bound.Conflicting(defsField, "dispatcher Lookup disagrees with its published definitions")
		}
	}
	return slices.Clip(defs), nil
}

// fingerprintDomain separates plan fingerprints from every other SHA-256 the
// project computes; bump the version if the layout changes.
const fingerprintDomain = "spice-orch/plan.Plan/v1"

// fingerprint hashes the domain, the number of definitions and each
// definition's complete-contract fingerprint in name order, every item
// length-prefixed.
func fingerprint(defs []tool.Definition) Fingerprint {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(fingerprintDomain)))
	h.Write(n[:])
	h.Write([]byte(fingerprintDomain))
	binary.BigEndian.PutUint64(n[:], uint64(len(defs)))
	h.Write(n[:])
	for _, d := range defs {
		fp := d.Fingerprint()
		binary.BigEndian.PutUint64(n[:], uint64(len(fp)))
		h.Write(n[:])
		h.Write(fp[:])
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}

// IsZero reports whether p is the zero Plan.
func (p Plan) IsZero() bool { return p.p == nil }

// ID returns the plan ID, or "" for the zero Plan.
func (p Plan) ID() ID {
	if p.p == nil {
		return ""
	}
	return p.p.id
}

// Fingerprint returns the fingerprint over every complete tool contract.
func (p Plan) Fingerprint() Fingerprint {
	if p.p == nil {
		return Fingerprint{}
	}
	return p.p.fingerprint
}

// Identity returns the plan's ID and fingerprint.
func (p Plan) Identity() Identity { return Identity{ID: p.ID(), Fingerprint: p.Fingerprint()} }

// Dispatcher returns the dispatcher every call of a run on this plan must go
// through (K13).
func (p Plan) Dispatcher() tool.Dispatcher {
	if p.p == nil {
		return nil
	}
	return p.p.dispatcher
}

// Definitions yields the frozen definitions in name order.
func (p Plan) Definitions() iter.Seq[tool.Definition] {
	if p.p == nil {
		return func(func(tool.Definition) bool) {}
	}
	return slices.Values(p.p.defs)
}

// Len returns the number of definitions.
func (p Plan) Len() int {
	if p.p == nil {
		return 0
	}
	return len(p.p.defs)
}

// Lookup returns the frozen definition named name.
func (p Plan) Lookup(name string) (tool.Definition, bool) {
	if p.p == nil {
		return tool.Definition{}, false
	}
	i, ok := slices.BinarySearchFunc(p.p.defs, name, func(d tool.Definition, n string) int {
		return cmp.Compare(d.Name(), n)
	})
	if !ok {
		return tool.Definition{}, false
	}
	return p.p.defs[i], true
}

// Matches returns nil when p has exactly the identity want, a *bound.Error
// when want itself is invalid, and a *MismatchError otherwise. Resume and
// import call it after leasing the exact plan ID, before anything else.
func (p Plan) Matches(want Identity) error {
	if err := want.Check(); err != nil {
		return err
	}
	got := p.Identity()
	if got != want {
		return &MismatchError{Want: want, Got: got}
	}
	return nil
}
