package metrics

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

type fakeWorkers struct{ memErr error }

func (f fakeWorkers) ListWorkers(context.Context, string) ([]units.Worker, error) {
	return []units.Worker{
		{Unit: "flexiq-email@1.service", Pool: "email", Slot: 1, ControlGroup: "/flexiq.slice/x"},
		{Unit: "flexiq-email@2.service", Pool: "email", Slot: 2}, // not running
	}, nil
}
func (f fakeWorkers) CPUUsage(units.Worker) (time.Duration, error) {
	return 1500 * time.Millisecond, nil
}
func (f fakeWorkers) MemoryUsage(units.Worker) (uint64, uint64, bool, error) {
	return 1 << 20, 0, false, f.memErr
}

func TestTickAndEvents(t *testing.T) {
	m := New(func() int64 { return 3 }, fakeWorkers{})
	age := 2.5
	rep := api.TickReport{Pool: "email", Live: 2, Draining: 1, Min: 1, Max: 5,
		Action: "scale-up", Desired: 4,
		Queue:    &api.QueueView{Pending: 40, Running: 3, OldestAgeSec: &age},
		Duration: 20 * time.Millisecond}
	m.Tick(rep)
	rep.Action, rep.Queue, rep.SourceErr = "hold", nil, errors.New("down")
	m.Tick(rep)
	m.Event(eventlog.WorkerStarted, eventlog.Fields{"FLEXIQ_POOL": "email"})
	m.Event(eventlog.WorkerCrashed, eventlog.Fields{"FLEXIQ_POOL": "email", "FLEXIQ_RESULT": "exit-code"})

	want := `
# HELP flexiq_scaled_queue_pending Jobs waiting in the queue, as the source last read them.
# TYPE flexiq_scaled_queue_pending gauge
flexiq_scaled_queue_pending{pool="email"} 40
# HELP flexiq_scaled_queue_oldest_age_seconds Age of the oldest pending job; absent when the source cannot tell.
# TYPE flexiq_scaled_queue_oldest_age_seconds gauge
flexiq_scaled_queue_oldest_age_seconds{pool="email"} 2.5
# HELP flexiq_scaled_workers_desired The workers the last decision asked for.
# TYPE flexiq_scaled_workers_desired gauge
flexiq_scaled_workers_desired{pool="email"} 4
# HELP flexiq_scaled_decisions_total Ticks by the action decided: scale-up, scale-down, stable, hold.
# TYPE flexiq_scaled_decisions_total counter
flexiq_scaled_decisions_total{action="hold",pool="email"} 1
flexiq_scaled_decisions_total{action="scale-up",pool="email"} 1
# HELP flexiq_scaled_source_errors_total Ticks whose read of the queue failed.
# TYPE flexiq_scaled_source_errors_total counter
flexiq_scaled_source_errors_total{pool="email"} 1
# HELP flexiq_scaled_worker_starts_total Workers started.
# TYPE flexiq_scaled_worker_starts_total counter
flexiq_scaled_worker_starts_total{pool="email"} 1
# HELP flexiq_scaled_worker_crashes_total Workers that failed, by systemd's result (exit-code, signal, start-failed...).
# TYPE flexiq_scaled_worker_crashes_total counter
flexiq_scaled_worker_crashes_total{pool="email",result="exit-code"} 1
# HELP flexiq_scaled_dbus_reconnects_total Reconnections to the service manager's bus.
# TYPE flexiq_scaled_dbus_reconnects_total counter
flexiq_scaled_dbus_reconnects_total 3
# HELP container_cpu_usage_seconds_total CPU time the worker's cgroup has used.
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{pool="email",slot="1",unit="flexiq-email@1.service"} 1.5
# HELP container_memory_usage_bytes Memory the worker's cgroup uses (memory.current).
# TYPE container_memory_usage_bytes gauge
container_memory_usage_bytes{pool="email",slot="1",unit="flexiq-email@1.service"} 1.048576e+06
`
	names := []string{"flexiq_scaled_queue_pending", "flexiq_scaled_queue_oldest_age_seconds", "flexiq_scaled_workers_desired",
		"flexiq_scaled_decisions_total", "flexiq_scaled_source_errors_total", "flexiq_scaled_worker_starts_total",
		"flexiq_scaled_worker_crashes_total", "flexiq_scaled_dbus_reconnects_total",
		"container_cpu_usage_seconds_total", "container_memory_usage_bytes", "container_memory_limit_bytes"}
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
	if got := testutil.ToFloat64(m.mode.WithLabelValues("email", "active")); got != 1 {
		t.Errorf("mode active = %v", got)
	}
	if n := testutil.CollectAndCount(m.tick); n != 1 {
		t.Errorf("%d tick histograms", n)
	}

	m.Forget("email")
	if n := testutil.CollectAndCount(m.gauges["queue_pending"]); n != 0 {
		t.Errorf("a forgotten pool left %d pending series", n)
	}
}

// Memory the host cannot read (a hybrid host's v1 memory controller) is
// left out, never reported as 0.
func TestMemoryUnavailable(t *testing.T) {
	m := New(nil, fakeWorkers{memErr: errors.New("no memory.current")})
	if n, err := testutil.GatherAndCount(m.Registry, "container_memory_usage_bytes"); err != nil || n != 0 {
		t.Errorf("%d memory series (%v), want none", n, err)
	}
	if n, _ := testutil.GatherAndCount(m.Registry, "container_cpu_usage_seconds_total"); n != 1 {
		t.Errorf("%d cpu series, want 1", n)
	}
}

// The mode gauge is 1 for the pool's mode as the controller reports it, 0
// for the others; an empty mode is active.
func TestModeGauge(t *testing.T) {
	m := New(func() int64 { return 0 }, fakeWorkers{})
	for _, mode := range []string{"", "paused", "pinned", "dry-run"} {
		m.Tick(api.TickReport{Pool: "email", Mode: mode})
		want := mode
		if want == "" {
			want = "active"
		}
		for _, md := range Modes {
			got := testutil.ToFloat64(m.mode.WithLabelValues("email", md))
			if (md == want) != (got == 1) || (got != 0 && got != 1) {
				t.Errorf("mode %q: pool_mode{mode=%q} = %v", mode, md, got)
			}
		}
	}
}

// A service pool's live replicas are split into ready and not ready; a
// queue pool has neither series.
func TestReadyGauges(t *testing.T) {
	m := New(nil, nil)
	m.Tick(api.TickReport{Pool: "web", Live: 3, Service: true, Ready: 2, NotReady: 1})
	m.Tick(api.TickReport{Pool: "email", Live: 2})
	want := `
# HELP flexiq_scaled_workers_ready A service pool's live replicas that are ready (in discovery).
# TYPE flexiq_scaled_workers_ready gauge
flexiq_scaled_workers_ready{pool="web"} 2
# HELP flexiq_scaled_workers_not_ready A service pool's live replicas that are starting or failing their readiness (counted as current, not in discovery).
# TYPE flexiq_scaled_workers_not_ready gauge
flexiq_scaled_workers_not_ready{pool="web"} 1
`
	if err := testutil.GatherAndCompare(m.Registry, strings.NewReader(want), "flexiq_scaled_workers_ready", "flexiq_scaled_workers_not_ready"); err != nil {
		t.Error(err)
	}
}
