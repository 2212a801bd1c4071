package host

import (
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/spice-orch/spice-orch/kernel/bound"
	"github.com/spice-orch/spice-orch/kernel/tool"
	"github.com/spice-orch/spice-orch/plugins/handshake"
	pb "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"
)

// MaxVersionBytes bounds a manifest's plugin version.
const MaxVersionBytes = 64

// Manifest is a verified manifest.
type Manifest struct {
	Protocol uint32
	Name     string
	Version  string
	// Path and Digest are the executable that was verified and run.
	Path, Digest string
	// Tools are the kernel definitions, in the manifest's order.
	Tools []tool.Definition
	// Bounds are the effective bounds: the smaller of the plugin's and
	// the host's.
	Bounds Bounds
}

// Bounds are the effective per-plugin bounds.
type Bounds struct {
	MaxRequestBytes    int
	MaxResponseBytes   int
	MaxConcurrentCalls int
	CallTimeout        time.Duration
}

// VerifyManifest checks a manifest as Launch does, against cfg's bounds
// (zero fields take the defaults). Fuzzed; also useful to conformance
// suites.
func VerifyManifest(m *pb.Manifest, cfg Config) (Manifest, error) {
	if cfg.Path == "" {
		cfg.Path = "/manifest"
	}
	if cfg.SHA256 == "" {
		cfg.SHA256 = "0000000000000000000000000000000000000000000000000000000000000000"
	}
	cfg, err := cfg.normalize()
	if err != nil {
		return Manifest{}, err
	}
	return verifyManifest(m, cfg)
}

func verifyManifest(m *pb.Manifest, cfg Config) (Manifest, error) {
	bad := func(reason string, err error) (Manifest, error) {
		return Manifest{}, &LaunchError{Path: cfg.Path, Kind: ErrManifest, Reason: reason, Err: err}
	}
	if m == nil {
		return bad("no manifest", nil)
	}
	if m.GetProtocolVersion() != handshake.Version {
		return Manifest{}, &LaunchError{Path: cfg.Path, Kind: ErrProtocol,
			Reason: "the manifest names protocol " + strconv.FormatUint(uint64(m.GetProtocolVersion()), 10) + "; this host speaks 1"}
	}
	if err := bound.Name("manifest.plugin_name", m.GetPluginName()); err != nil {
		return bad(err.Error(), err)
	}
	if cfg.Name != "" && m.GetPluginName() != cfg.Name {
		return bad("the plugin is named "+m.GetPluginName()+", the config expects "+cfg.Name, nil)
	}
	if v := m.GetPluginVersion(); v == "" || len(v) > MaxVersionBytes || !utf8.ValidString(v) {
		return bad("plugin_version must be 1.."+strconv.Itoa(MaxVersionBytes)+" bytes of UTF-8", nil)
	}
	if n := len(m.GetTools()); n == 0 || n > bound.MaxToolsPerPlan {
		return bad("a plugin serves 1.."+strconv.Itoa(bound.MaxToolsPerPlan)+" tools", nil)
	}
	out := Manifest{Protocol: m.GetProtocolVersion(), Name: m.GetPluginName(), Version: m.GetPluginVersion()}
	seen := make(map[string]bool, len(m.GetTools()))
	for i, t := range m.GetTools() {
		def, err := definition(t)
		field := "tools[" + strconv.Itoa(i) + "]"
		if err != nil {
			return bad(field+": "+err.Error(), err)
		}
		if seen[def.Name()] {
			return bad(field+": duplicate tool name "+def.Name(), nil)
		}
		seen[def.Name()] = true
		out.Tools = append(out.Tools, def)
	}
	b := m.GetBounds()
	out.Bounds = Bounds{
		MaxRequestBytes:    smaller(cfg.MaxRequestBytes, int(b.GetMaxRequestBytes())),
		MaxResponseBytes:   smaller(cfg.MaxResponseBytes, int(b.GetMaxResponseBytes())),
		MaxConcurrentCalls: smaller(cfg.MaxConcurrentCalls, int(b.GetMaxConcurrentCalls())),
		CallTimeout:        cfg.CallTimeout,
	}
	if ms := b.GetMaxCallMillis(); ms > 0 && ms < uint64(cfg.CallTimeout/time.Millisecond) {
		out.Bounds.CallTimeout = time.Duration(ms) * time.Millisecond
	}
	return out, nil
}

func smaller(host, plugin int) int {
	if plugin > 0 && plugin < host {
		return plugin
	}
	return host
}

// definition builds the kernel definition of a manifest tool: the kernel
// refuses contradictions (K4) and bad names, schemas and capabilities.
func definition(t *pb.ToolDefinition) (tool.Definition, error) {
	var eff tool.Effect
	switch t.GetEffect() {
	case pb.Effect_EFFECT_READ_ONLY:
		eff = tool.ReadOnly
	case pb.Effect_EFFECT_MUTATING:
		eff = tool.Mutating
	case pb.Effect_EFFECT_UNSPECIFIED:
	default:
		eff = 255
	}
	var rep tool.Replay
	switch t.GetReplaySafety() {
	case pb.ReplaySafety_REPLAY_SAFETY_SAFE:
		rep = tool.Safe
	case pb.ReplaySafety_REPLAY_SAFETY_IDEMPOTENT:
		rep = tool.Idempotent
	case pb.ReplaySafety_REPLAY_SAFETY_UNSAFE:
		rep = tool.Unsafe
	case pb.ReplaySafety_REPLAY_SAFETY_UNSPECIFIED:
	default:
		rep = 255
	}
	if len(t.GetCapabilities()) > bound.MaxCapabilities {
		return tool.Definition{}, bound.Count("tool.capabilities", len(t.GetCapabilities()), bound.MaxCapabilities)
	}
	caps := make([]tool.Capability, len(t.GetCapabilities()))
	for i, c := range t.GetCapabilities() {
		caps[i] = tool.Capability(c)
	}
	var schema []byte
	if s := t.GetInputSchemaJson(); s != "" {
		schema = []byte(s)
	}
	return tool.NewDefinition(tool.DefinitionConfig{
		Name: t.GetName(), Description: t.GetDescription(), Schema: schema,
		Effect: eff, Replay: rep, Capabilities: caps,
	})
}
