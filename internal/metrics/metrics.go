// Package metrics is the daemon's Prometheus /metrics: each pool's state and
// decisions (from api.TickReport, every tick), worker starts and
// crashes (from the event log), each worker's CPU and memory under the names
// cAdvisor gives them (read from the workers' cgroups at scrape time), and
// the daemon's own (D-Bus reconnects, build info, the Go runtime).
//
// The daemon keeps its private network: it serves /metrics on a Unix socket
// in its runtime directory, and flexiq-scaled-metrics.socket, a socket unit
// on localhost, hands the connections to systemd-socket-proxyd.
package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/version"
)

const ns = "flexiq_scaled"

// Modes are the values of the mode gauge's label (api.TickReport.Mode).
var Modes = []string{"active", "paused", "pinned", "dry-run"}

// Metrics holds the daemon's collectors. Its methods are safe for
// concurrent use.
type Metrics struct {
	Registry *prometheus.Registry

	mu    sync.Mutex
	pools map[string]bool

	gauges    map[string]*prometheus.GaugeVec
	mode      *prometheus.GaugeVec
	decisions *prometheus.CounterVec
	starts    *prometheus.CounterVec
	crashes   *prometheus.CounterVec
	srcErrors *prometheus.CounterVec
	tick      *prometheus.HistogramVec
	wake      wakeSeries
}

// gaugeHelp are the per-pool gauges, by name.
var gaugeHelp = map[string]string{
	"workers_current":          "Live workers (active or starting), not counting draining ones.",
	"workers_desired":          "The workers the last decision asked for.",
	"workers_min":              "The pool's min_workers.",
	"workers_max":              "The pool's max_workers (after the host's capacity cap).",
	"workers_draining":         "Workers asked to stop that have not yet stopped.",
	"workers_ready":            "A service pool's live replicas that are ready (in discovery).",
	"workers_not_ready":        "A service pool's live replicas that are starting or failing their readiness (counted as current, not in discovery).",
	"queue_pending":            "Jobs waiting in the queue, as the source last read them.",
	"queue_running":            "Jobs running, as the source last read them (draining workers' included).",
	"queue_paused":             "Jobs in paused queues.",
	"queue_oldest_age_seconds": "Age of the oldest pending job; absent when the source cannot tell.",
	"pool_degraded":            "1 while the pool is degraded: short of its min_workers because a worker keeps failing; else 0.",
	// Fleet mode (issue 20): set for a pool that joins a fleet only.
	"fleet_leader":           "1 while this host leads the pool's fleet, else 0 (fleet pools only).",
	"fleet_epoch":            "The epoch of the pool's fleet lease as this host last read it.",
	"fleet_plan_age_seconds": "Age of the fleet plan this host holds, on the store's clock; absent before the first plan.",
	"fleet_target":           "The fleet's target in the plan this host holds.",
	"fleet_share":            "This host's share of the fleet's target, as it applies it.",
	"fleet_store_reachable":  "1 while the fleet's coordination store answered this host's last tick, else 0.",
}

// New builds the collectors; reconnects reports the D-Bus reconnections
// (units.Manager.Reconnects) and workers reads the workers' cgroups
// (units.Manager); either may be nil.
func New(reconnects func() int64, workers WorkerReader) *Metrics {
	m := &Metrics{Registry: prometheus.NewRegistry(), pools: map[string]bool{}, gauges: map[string]*prometheus.GaugeVec{}}
	pool := []string{"pool"}
	for name, help := range gaugeHelp {
		m.gauges[name] = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: name, Help: help}, pool)
		m.Registry.MustRegister(m.gauges[name])
	}
	m.mode = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "pool_mode",
		Help: "1 for the pool's mode (active, paused, pinned, dry-run), 0 for the others."}, []string{"pool", "mode"})
	m.decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "decisions_total",
		Help: "Ticks by the action decided: scale-up, scale-down, stable, hold."}, []string{"pool", "action"})
	m.starts = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_starts_total",
		Help: "Workers started."}, pool)
	m.crashes = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "worker_crashes_total",
		Help: "Workers that failed, by systemd's result (exit-code, signal, start-failed...)."}, []string{"pool", "result"})
	m.srcErrors = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "source_errors_total",
		Help: "Ticks whose read of the queue failed."}, pool)
	m.tick = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Name: "tick_duration_seconds",
		Help:    "How long a tick took: listing the workers, reading the queue, deciding, acting.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, pool)
	m.Registry.MustRegister(m.mode, m.decisions, m.starts, m.crashes, m.srcErrors, m.tick)
	m.registerWake()

	bi := prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "build_info",
		Help: "1, labelled with the daemon's version."}, []string{"version"})
	bi.WithLabelValues(version.Version).Set(1)
	m.Registry.MustRegister(bi,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector())
	if reconnects != nil {
		m.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Name: "dbus_reconnects_total",
			Help: "Reconnections to the service manager's bus."}, func() float64 { return float64(reconnects()) }))
	}
	m.Registry.MustRegister(&workerCollector{r: workers})
	return m
}

// oneIf is a boolean as a gauge's value.
func oneIf(v bool) float64 {
	if v {
		return 1
	}
	return 0
}

// Tick records one tick's report (controller.Options.OnTick).
func (m *Metrics) Tick(r api.TickReport) {
	m.mu.Lock()
	m.pools[r.Pool] = true
	m.mu.Unlock()
	g := func(name string, v float64) { m.gauges[name].WithLabelValues(r.Pool).Set(v) }
	g("workers_current", float64(r.Live))
	g("workers_desired", float64(r.Desired))
	g("workers_min", float64(r.Min))
	g("workers_max", float64(r.Max))
	g("workers_draining", float64(r.Draining))
	if r.Service {
		g("workers_ready", float64(r.Ready))
		g("workers_not_ready", float64(r.NotReady))
	}
	// gOpt sets a gauge that is absent when unknown.
	gOpt := func(name string, v *float64) {
		if v != nil {
			g(name, *v)
		} else {
			m.gauges[name].DeleteLabelValues(r.Pool)
		}
	}
	g("pool_degraded", oneIf(r.Degraded))
	if f := r.Fleet; f != nil {
		g("fleet_leader", oneIf(f.IsLeader))
		g("fleet_epoch", float64(f.Epoch))
		g("fleet_target", float64(f.Target))
		g("fleet_share", float64(f.Share))
		g("fleet_store_reachable", oneIf(f.Reachable))
		gOpt("fleet_plan_age_seconds", f.PlanAgeSec)
	}
	if q := r.Queue; q != nil {
		g("queue_pending", float64(q.Pending))
		g("queue_running", float64(q.Running))
		g("queue_paused", float64(q.Paused))
		gOpt("queue_oldest_age_seconds", q.OldestAgeSec)
	}
	if r.SourceErr != nil {
		m.srcErrors.WithLabelValues(r.Pool).Inc()
	}
	mode := r.Mode
	if mode == "" {
		mode = "active"
	}
	for _, md := range Modes {
		m.mode.WithLabelValues(r.Pool, md).Set(oneIf(md == mode))
	}
	m.decisions.WithLabelValues(r.Pool, r.Action).Inc()
	m.tick.WithLabelValues(r.Pool).Observe(r.Duration.Seconds())
}

// Event counts worker starts and crashes from the event log
// (eventlog.Logger.SetTap): every one is logged, unlike decisions.
func (m *Metrics) Event(k eventlog.Kind, f eventlog.Fields) {
	switch k {
	case eventlog.WorkerStarted:
		m.starts.WithLabelValues(f["FLEXIQ_POOL"]).Inc()
	case eventlog.WorkerCrashed:
		result := f["FLEXIQ_RESULT"]
		if result == "" {
			result = "unknown"
		}
		m.crashes.WithLabelValues(f["FLEXIQ_POOL"], result).Inc()
	}
}

// Forget drops a pool's series, for a pool that a reload removed.
func (m *Metrics) Forget(pool string) {
	m.mu.Lock()
	delete(m.pools, pool)
	m.mu.Unlock()
	match := prometheus.Labels{"pool": pool}
	for _, g := range m.gauges {
		g.DeletePartialMatch(match)
	}
	m.mode.DeletePartialMatch(match)
	m.decisions.DeletePartialMatch(match)
	m.starts.DeletePartialMatch(match)
	m.crashes.DeletePartialMatch(match)
	m.srcErrors.DeletePartialMatch(match)
	m.tick.DeletePartialMatch(match)
	m.forgetWake(match)
}
