package tool

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"iter"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
)

// Effect says whether a tool changes state outside the run.
type Effect uint8

const (
	ReadOnly Effect = iota + 1
	Mutating
)

func (e Effect) String() string {
	switch e {
	case ReadOnly:
		return "read_only"
	case Mutating:
		return "mutating"
	}
	return "effect(" + strconv.Itoa(int(e)) + ")"
}

// Replay says what running the same call twice does.
type Replay uint8

const (
	// Safe: no external effect; replay is always harmless.
	Safe Replay = iota + 1
	// Idempotent: a second identical call leaves the same state as one.
	Idempotent
	// Unsafe: a second call may change state again.
	Unsafe
)

func (r Replay) String() string {
	switch r {
	case Safe:
		return "safe"
	case Idempotent:
		return "idempotent"
	case Unsafe:
		return "unsafe"
	}
	return "replay(" + strconv.Itoa(int(r)) + ")"
}

// Capability names an external power a tool uses. Capabilities are names
// (bound.Name syntax); the ones below are known to the kernel because a
// read-only tool may not hold them (K4).
type Capability string

const (
	FilesystemRead   Capability = "fs.read"
	FilesystemWrite  Capability = "fs.write"
	ProcessExecute   Capability = "process.execute"
	Network          Capability = "network"
	EnvironmentRead  Capability = "env.read"
	EnvironmentWrite Capability = "env.write"
)

// CanMutate reports whether c lets a tool change external state.
func (c Capability) CanMutate() bool {
	switch c {
	case FilesystemWrite, ProcessExecute, Network, EnvironmentWrite:
		return true
	}
	return false
}

// Fingerprint identifies a complete tool contract.
type Fingerprint [sha256.Size]byte

// String returns the lower-case hex form.
func (f Fingerprint) String() string { return hex.EncodeToString(f[:]) }

// DefinitionConfig is the input to NewDefinition.
type DefinitionConfig struct {
	Name         string
	Description  string
	Schema       json.RawMessage // a JSON object describing the arguments; empty means {"type":"object"}
	Effect       Effect
	Replay       Replay
	Capabilities []Capability // an unordered set; duplicates are an error
}

// Definition is an immutable tool contract.
type Definition struct {
	name         string
	description  string
	schema       string // compact JSON
	effect       Effect
	replay       Replay
	capabilities []Capability // sorted, unique; never handed out
	fingerprint  Fingerprint
}

const defaultSchema = `{"type":"object"}`

// NewDefinition validates cfg and returns a Definition. Contradictions fail
// here (K4): read-only requires Safe replay and no mutation-capable
// capability; mutating cannot be Safe.
func NewDefinition(cfg DefinitionConfig) (Definition, error) {
	if err := bound.Name("tool.name", cfg.Name); err != nil {
		return Definition{}, err
	}
	if err := bound.OptionalText("tool.description", cfg.Description, bound.MaxDescriptionBytes); err != nil {
		return Definition{}, err
	}
	schema, err := compactSchema(cfg.Schema)
	if err != nil {
		return Definition{}, err
	}
	switch cfg.Effect {
	case ReadOnly, Mutating:
	case 0:
		return Definition{}, bound.Missing("tool.effect")
	default:
		return Definition{}, bound.Malformedf("tool.effect", "unknown effect")
	}
	switch cfg.Replay {
	case Safe, Idempotent, Unsafe:
	case 0:
		return Definition{}, bound.Missing("tool.replay")
	default:
		return Definition{}, bound.Malformedf("tool.replay", "unknown replay safety")
	}
	if cfg.Effect == ReadOnly && cfg.Replay != Safe {
		return Definition{}, bound.Conflicting("tool.replay", "a read-only tool must be replay-safe")
	}
	if cfg.Effect == Mutating && cfg.Replay == Safe {
		return Definition{}, bound.Conflicting("tool.replay", "a mutating tool cannot be replay-safe")
	}
	if err := bound.Count("tool.capabilities", len(cfg.Capabilities), bound.MaxCapabilities); err != nil {
		return Definition{}, err
	}
	caps := slices.Clone(cfg.Capabilities)
	slices.Sort(caps)
	for i, c := range caps {
		if err := bound.Name("tool.capabilities", string(c)); err != nil {
			return Definition{}, err
		}
		if i > 0 && caps[i-1] == c {
			return Definition{}, bound.Malformedf("tool.capabilities", "duplicate capability")
		}
		if cfg.Effect == ReadOnly && c.CanMutate() {
			return Definition{}, bound.Conflicting("tool.capabilities", "a read-only tool cannot hold capability "+string(c))
		}
	}
	d := Definition{
		name:         cfg.Name,
		description:  cfg.Description,
		schema:       schema,
		effect:       cfg.Effect,
		replay:       cfg.Replay,
		capabilities: caps,
	}
	d.fingerprint = d.computeFingerprint()
	return d, nil
}

func compactSchema(raw json.RawMessage) (string, error) {
	if len(raw) == 0 {
		return defaultSchema, nil
	}
	if err := bound.Bytes("tool.schema", len(raw), bound.MaxSchemaBytes); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if !utf8.Valid(raw) {
		return "", bound.Malformedf("tool.schema", "not valid UTF-8")
	}
	if err := json.Compact(&buf, raw); err != nil {
		return "", bound.Malformedf("tool.schema", "not valid JSON")
	}
	if buf.Len() == 0 || buf.Bytes()[0] != '{' {
		return "", bound.Malformedf("tool.schema", "must be a JSON object")
	}
	return buf.String(), nil
}

// Name returns the tool name the model uses.
func (d Definition) Name() string { return d.name }

// Description returns the text shown to the model.
func (d Definition) Description() string { return d.description }

// Schema returns a copy of the compact JSON schema of the arguments.
func (d Definition) Schema() json.RawMessage { return json.RawMessage(d.schema) }

// SchemaString returns the compact JSON schema without copying.
func (d Definition) SchemaString() string { return d.schema }

// Effect returns the declared effect.
func (d Definition) Effect() Effect { return d.effect }

// Replay returns the declared replay safety.
func (d Definition) Replay() Replay { return d.replay }

// Capabilities yields the capabilities in canonical lexical order (K5).
func (d Definition) Capabilities() iter.Seq[Capability] { return slices.Values(d.capabilities) }

// HasCapability reports whether d declares c.
func (d Definition) HasCapability(c Capability) bool {
	_, ok := slices.BinarySearch(d.capabilities, c)
	return ok
}

// Fingerprint returns the stable fingerprint of every field (K5).
func (d Definition) Fingerprint() Fingerprint { return d.fingerprint }

// IsZero reports whether d is the zero Definition.
func (d Definition) IsZero() bool { return d.name == "" }

// fingerprintDomain separates definition fingerprints from every other
// SHA-256 the project computes; bump the version if the layout changes.
const fingerprintDomain = "spice-orch/tool.Definition/v1"

// computeFingerprint hashes every field, each length-prefixed, so no two
// different definitions can share an encoding.
func (d Definition) computeFingerprint() Fingerprint {
	h := sha256.New()
	var n [8]byte
	field := func(s string) {
		binary.BigEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	field(fingerprintDomain)
	field(d.name)
	field(d.description)
	field(d.schema)
	field(d.effect.String())
	field(d.replay.String())
	binary.BigEndian.PutUint64(n[:], uint64(len(d.capabilities)))
	h.Write(n[:])
	for _, c := range d.capabilities {
		field(string(c))
	}
	var f Fingerprint
	h.Sum(f[:0])
	return f
}
