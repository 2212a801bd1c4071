package host

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spice-orch/spice-orch/kernel/enginetest"
	"github.com/spice-orch/spice-orch/kernel/tool"
)

// BenchmarkPluginCall is one echo call through the canonical dispatcher
// to the fixture process and back.
func BenchmarkPluginCall(b *testing.B) {
	p := launch(b, config(b, fixtureV1, ""))
	d := dispatcher(b, p.Tools()...)
	c := call(b, "c1", "echo", `{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	host0, plugin0 := cpuTimes(b, p.PID())
	for b.Loop() {
		if _, err := d.Dispatch(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
	// CPU per call on both sides: what the call costs a machine that is
	// not busy with anything else, unlike the wall time on a shared one.
	host1, plugin1 := cpuTimes(b, p.PID())
	b.ReportMetric(float64((host1-host0).Microseconds())/float64(b.N), "host-cpu-µs/op")
	b.ReportMetric(float64((plugin1-plugin0).Microseconds())/float64(b.N), "plugin-cpu-µs/op")
}

// cpuTimes returns the CPU time (user and system) used so far by this
// process and by the plugin process pid.
func cpuTimes(b *testing.B, pid int) (self, plugin time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	// utime and stime are fields 14 and 15 of stat, in clock ticks (100/s).
	ut, _ := strconv.Atoi(f[11])
	stt, _ := strconv.Atoi(f[12])
	return self, time.Duration(ut+stt) * 10 * time.Millisecond
}

// BenchmarkCompiledEcho is the same call to a compiled echo tool, for the
// ratio of the two.
func BenchmarkCompiledEcho(b *testing.B) {
	d := dispatcher(b, enginetest.Echo())
	c := call(b, "c1", "echo", `{"text":"hello"}`)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := d.Dispatch(ctx, c, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPluginLaunch is launch, verification (digest, handshake,
// manifest) and Close of the fixture.
func BenchmarkPluginLaunch(b *testing.B) {
	cfg := config(b, fixtureV1, "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := Launch(ctx, cfg)
		if err != nil {
			b.Fatal(err)
		}
		if len(p.Tools()) == 0 {
			b.Fatal("no tools")
		}
		_ = p.Close()
	}
}

var _ tool.Tool = enginetest.Echo()

// BenchmarkPluginActivate is a candidate's launch and verification to its
// activation for future leases (the old generation drains in the
// background).
func BenchmarkPluginActivate(b *testing.B) {
	s, err := NewSource(context.Background(), SourceConfig{PlanPrefix: "plan-b", Plugins: []Config{config(b, fixtureV1, "")}})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	cfg := config(b, fixtureV2, "")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Reload(ctx, 0, cfg); err != nil {
			b.Fatal(err)
		}
	}
}
