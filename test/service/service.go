package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// service holds the handler logic, apart from main's flags and signals so
// that tests drive it directly.
type service struct {
	pool, slot string
	latency    time.Duration
	jitter     time.Duration

	ready   atomic.Bool // set once the (simulated) model load is done
	failing atomic.Bool // a ready replica told to fail its probe

	reg      *prometheus.Registry
	inFlight prometheus.Gauge
	requests *prometheus.CounterVec
}

// newService registers the metrics a rule or a test scrapes: the in-flight
// gauge (what issue 19's PromQL scale-up rule reads), the request counter by
// code, and an info metric naming the replica, so a scrape of one replica
// says which one it is even without file_sd's target labels.
func newService(pool, slot string, latency, jitter time.Duration) *service {
	s := &service{pool: pool, slot: slot, latency: latency, jitter: jitter, reg: prometheus.NewRegistry()}
	s.inFlight = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "flexiq_testservice_requests_in_flight",
		Help: "Requests being served now (/health and /metrics excluded).",
	})
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "flexiq_testservice_requests_total",
		Help: "Requests served (/health and /metrics excluded), by status code.",
	}, []string{"code"})
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "flexiq_testservice_info",
		Help:        "Always 1; the labels name the replica (FLEXIQ_SCALED_POOL, FLEXIQ_SCALED_SLOT).",
		ConstLabels: prometheus.Labels{"pool": pool, "slot": slot},
	})
	info.Set(1)
	s.reg.MustRegister(s.inFlight, s.requests, info)
	return s
}

// handler routes /health, /metrics, and every other path to the work.
func (s *service) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", s.health)
	mux.Handle("/metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/", s.work)
	return mux
}

// healthy reports what /health answers: ready and not told to fail.
func (s *service) healthy() bool { return s.ready.Load() && !s.failing.Load() }

func (s *service) health(w http.ResponseWriter, _ *http.Request) {
	switch {
	case !s.ready.Load():
		http.Error(w, "not ready: still loading", http.StatusServiceUnavailable)
	case s.failing.Load():
		http.Error(w, "unhealthy: told to fail", http.StatusServiceUnavailable)
	default:
		fmt.Fprintln(w, "ok")
	}
}

// work answers after the configured latency (plus up to jitter), the way an
// inference server takes its time; a client that goes away ends the wait.
func (s *service) work(w http.ResponseWriter, r *http.Request) {
	s.inFlight.Inc()
	defer s.inFlight.Dec()
	code := http.StatusOK
	defer func() { s.requests.WithLabelValues(strconv.Itoa(code)).Inc() }()

	d := s.latency
	if s.jitter > 0 {
		d += rand.N(s.jitter)
	}
	if d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			code = 499 // nginx's "client closed request"; nothing is written
			return
		}
	}
	fmt.Fprintf(w, "pool=%s slot=%s path=%s\n", s.pool, s.slot, r.URL.Path)
}
