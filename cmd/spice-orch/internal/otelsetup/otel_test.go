package otelsetup

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/spice-orch/spice-orch/cmd/spice-orch/internal/spec"
	"github.com/spice-orch/spice-orch/scheduler"
)

// TestD3_SchedulerStatsReadARealScheduler adapts a real scheduler for the
// telemetry gauges, as serve will.
func TestD3_SchedulerStatsReadARealScheduler(t *testing.T) {
	s, err := scheduler.New(scheduler.Config{})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close(context.Background())) }()
	st := schedulerStats(s)()
	require.Zero(t, st.Queued)
	require.Zero(t, st.Running)
}

func TestD3_ProviderNamesFollowTheSpec(t *testing.T) {
	require.Equal(t, map[string]string{"writer": "spice_orch.scripted", "reviewer": "spice_orch.scripted"},
		ProviderNames(spec.Builtin()))
	require.Equal(t, "openai", providerName(spec.OpenAI))
	_, err := ParseProviders([]string{"writer"})
	require.Error(t, err)
	got, err := ParseProviders([]string{"writer=openai"})
	require.NoError(t, err)
	require.Equal(t, map[string]string{"writer": "openai"}, got)
}
