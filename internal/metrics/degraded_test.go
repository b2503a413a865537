package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

func TestDegradedGauge(t *testing.T) {
	m := New(nil, nil)
	for _, tc := range []struct {
		degraded bool
		want     float64
	}{{true, 1}, {false, 0}, {true, 1}} {
		m.Tick(api.TickReport{Pool: "web", Degraded: tc.degraded})
		if got := testutil.ToFloat64(m.gauges["pool_degraded"].WithLabelValues("web")); got != tc.want {
			t.Errorf("degraded %t: flexiq_scaled_pool_degraded = %v, want %v", tc.degraded, got, tc.want)
		}
	}
	m.Forget("web")
	if n := testutil.CollectAndCount(m.gauges["pool_degraded"]); n != 0 {
		t.Errorf("a forgotten pool left %d degraded series", n)
	}
}

// limitedWorkers are replicas with a memory.max, as a service pool's with
// memory_max.
type limitedWorkers struct{ fakeWorkers }

func (limitedWorkers) MemoryUsage(units.Worker) (uint64, uint64, bool, error) {
	return 300 << 20, 1 << 30, true, nil
}

func (limitedWorkers) ListWorkers(context.Context, string) ([]units.Worker, error) {
	return []units.Worker{{Unit: "flexiq-web@1.service", Pool: "web", Slot: 1, ControlGroup: "/flexiq.slice/x"}}, nil
}

// The series the platform's scale-down example divides, with the labels of
// container_cpu_usage_seconds_total, so that the division matches them one
// to one.
func TestMemorySeriesForThePlatformRule(t *testing.T) {
	m := New(nil, limitedWorkers{})
	want := `
# HELP container_cpu_usage_seconds_total CPU time the worker's cgroup has used.
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{pool="web",slot="1",unit="flexiq-web@1.service"} 1.5
# HELP container_memory_usage_bytes Memory the worker's cgroup uses (memory.current).
# TYPE container_memory_usage_bytes gauge
container_memory_usage_bytes{pool="web",slot="1",unit="flexiq-web@1.service"} 3.145728e+08
# HELP container_memory_limit_bytes The worker's memory limit (memory.max); absent without one.
# TYPE container_memory_limit_bytes gauge
container_memory_limit_bytes{pool="web",slot="1",unit="flexiq-web@1.service"} 1.073741824e+09
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want),
		"container_cpu_usage_seconds_total", "container_memory_usage_bytes", "container_memory_limit_bytes"); err != nil {
		t.Error(err)
	}
}
