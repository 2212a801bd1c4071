package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	pluginv1 "github.com/spice-orch/spice-orch/plugins/pluginpb/v1"

	"github.com/spice-orch/spice-orch/kernel/id"
	"github.com/spice-orch/spice-orch/kernel/problem"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// definition builds the kernel's tool.Definition from a manifest entry, so
// the kernel's own contradictions (K4) and bounds judge it.
func definition(d *pluginv1.ToolDefinition) (tool.Definition, error) {
	cfg := tool.DefinitionConfig{
		Name:        d.GetName(),
		Description: d.GetDescription(),
		Effect:      effectOf(d.GetEffect()),
		Replay:      replayOf(d.GetReplaySafety()),
	}
	if s := d.GetInputSchemaJson(); s != "" {
		cfg.Schema = json.RawMessage(s)
	}
	for _, c := range d.GetCapabilities() {
		cfg.Capabilities = append(cfg.Capabilities, tool.Capability(c))
	}
	return tool.NewDefinition(cfg)
}

// invalid maps an enum value the kernel does not know to one NewDefinition
// refuses as unknown.
const invalid = 0xff

func effectOf(e pluginv1.Effect) tool.Effect {
	switch e {
	case pluginv1.Effect_EFFECT_UNSPECIFIED:
		return 0
	case pluginv1.Effect_EFFECT_READ_ONLY:
		return tool.ReadOnly
	case pluginv1.Effect_EFFECT_MUTATING:
		return tool.Mutating
	}
	return invalid
}

func replayOf(r pluginv1.ReplaySafety) tool.Replay {
	switch r {
	case pluginv1.ReplaySafety_REPLAY_SAFETY_UNSPECIFIED:
		return 0
	case pluginv1.ReplaySafety_REPLAY_SAFETY_SAFE:
		return tool.Safe
	case pluginv1.ReplaySafety_REPLAY_SAFETY_IDEMPOTENT:
		return tool.Idempotent
	case pluginv1.ReplaySafety_REPLAY_SAFETY_UNSAFE:
		return tool.Unsafe
	}
	return invalid
}

// kernelOutcome builds the kernel value an outcome stands for: a
// tool.Result or a *tool.ExecutionError, judged by the kernel's
// constructors and by the dispatcher's rules for def (K7).
func kernelOutcome(def tool.Definition, callID string, o *pluginv1.Outcome) (tool.Result, *tool.ExecutionError, error) {
	cid, err := id.Parse[id.Call]("call_id", callID)
	if err != nil {
		return tool.Result{}, nil, err
	}
	switch {
	case o.GetResult() != nil:
		r := o.GetResult()
		if p := r.GetProblem(); p != nil {
			pr, err := problem.New(p.GetCode(), p.GetMessage())
			if err != nil {
				return tool.Result{}, nil, fmt.Errorf("result problem: %w", err)
			}
			res, err := tool.NewProblemResult(cid, pr, r.GetContent())
			return res, nil, err
		}
		res, err := tool.NewResult(cid, r.GetContent())
		return res, nil, err
	case o.GetError() != nil:
		e := o.GetError()
		pr, err := problem.New(e.GetProblem().GetCode(), e.GetProblem().GetMessage())
		if err != nil {
			return tool.Result{}, nil, fmt.Errorf("execution error problem: %w", err)
		}
		cfg := tool.ExecutionErrorConfig{CallID: cid, Problem: pr,
			RetryAfter: time.Duration(e.GetRetryAfterMillis()) * time.Millisecond}
		switch e.GetCertainty() {
		case pluginv1.Certainty_CERTAINTY_DEFINITIVE:
			cfg.Outcome = tool.Definitive
		case pluginv1.Certainty_CERTAINTY_UNCERTAIN:
			if def.Effect() != tool.Mutating {
				// Nothing happened that a read-only call could leave
				// undone: uncertainty is for effects.
				return tool.Result{}, nil, errors.New("execution error: uncertain from a read-only tool")
			}
			cfg.Outcome = tool.Uncertain
		default:
			return tool.Result{}, nil, fmt.Errorf("execution error: certainty %v", e.GetCertainty())
		}
		switch e.GetRetryAdvice() {
		case pluginv1.RetryAdvice_RETRY_ADVICE_NEVER, pluginv1.RetryAdvice_RETRY_ADVICE_UNSPECIFIED:
			cfg.Retry = tool.NoRetry
		case pluginv1.RetryAdvice_RETRY_ADVICE_ALLOWED:
			cfg.Retry = tool.RetryAllowed
		default:
			return tool.Result{}, nil, fmt.Errorf("execution error: retry advice %v", e.GetRetryAdvice())
		}
		ee, err := tool.NewExecutionError(cfg)
		if err != nil {
			return tool.Result{}, nil, err
		}
		if ee.Outcome() == tool.Uncertain && def.Effect() == tool.ReadOnly {
			return tool.Result{}, nil, fmt.Errorf("an uncertain outcome from read-only tool %s", def.Name())
		}
		if ee.Retry() == tool.RetryAllowed && def.Replay() == tool.Unsafe {
			return tool.Result{}, nil, fmt.Errorf("retry advice from replay-unsafe tool %s", def.Name())
		}
		return tool.Result{}, ee, nil
	}
	return tool.Result{}, nil, fmt.Errorf("an outcome with neither a result nor an error")
}
