package api

// The control API of a service pool's wake address (issue 29), which the
// wake process (`flexiq-scaled wake POOL`, socket-activated) speaks.

// WakeRequest is POST /v1/pools/{pool}/wake: a wake-up when Wake, and
// the holder's counters in any case, for status and the metrics.
type WakeRequest struct {
	Wake bool `json:"wake"`
	WakeStats
}

// WakeStats are the wake process's counters: connections held now and
// being forwarded now, and since the process started those accepted,
// forwarded and answered 503.
type WakeStats struct {
	Held       int64  `json:"held"`
	Forwarding int64  `json:"forwarding"`
	Accepted   uint64 `json:"accepted"`
	Forwarded  uint64 `json:"forwarded"`
	Rejected   uint64 `json:"rejected"`
}

// WakeResponse answers a WakeRequest.
type WakeResponse struct {
	Pool string `json:"pool"`
	// Woken: the pool was asked to scale up (it was below one replica,
	// or a wake-up was already holding it).
	Woken bool `json:"woken"`
}

// WakeReady is GET /v1/pools/{pool}/wake/ready: the addresses (host:port)
// of the ready replicas' wake port, and the number of their version,
// which a long poll (?after=GENERATION) waits to change.
type WakeReady struct {
	Generation uint64   `json:"generation"`
	Addrs      []string `json:"addrs"`
}

// WakeView is what status shows of a pool's wake address.
type WakeView struct {
	Address string `json:"address"`
	Mode    string `json:"mode"`
	// Requests counts the wake requests since the daemon started;
	// Holding says whether a wake-up holds the pool above zero now.
	Requests uint64 `json:"requests"`
	Holding  bool   `json:"holding"`
	// The wake process's last report.
	WakeStats
}
