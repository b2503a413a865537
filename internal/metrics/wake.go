package metrics

import "github.com/prometheus/client_golang/prometheus"

// The wake addresses' series (issue 29).
type wakeSeries struct {
	requests *prometheus.CounterVec
	held     *prometheus.GaugeVec
}

func (m *Metrics) registerWake() {
	m.wake.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Name: "wake_requests_total",
		Help: "Wake requests from a service pool's wake address: connections that found no ready replica asked the pool to scale up from zero."}, []string{"pool"})
	m.wake.held = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: ns, Name: "wake_held_connections",
		Help: "Connections held at a service pool's wake address, waiting for a ready replica, as its process last reported."}, []string{"pool"})
	m.Registry.MustRegister(m.wake.requests, m.wake.held)
}

// WakeRequest counts a wake request of pool.
func (m *Metrics) WakeRequest(pool string) { m.wake.requests.WithLabelValues(pool).Inc() }

// WakeHeld sets the connections held at pool's wake address.
func (m *Metrics) WakeHeld(pool string, n int64) { m.wake.held.WithLabelValues(pool).Set(float64(n)) }

func (m *Metrics) forgetWake(match prometheus.Labels) {
	m.wake.requests.DeletePartialMatch(match)
	m.wake.held.DeletePartialMatch(match)
}
