package loadgen

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// Result counts how every request of a run ended. Failed is what issue 19's
// zero-loss figure is about; Samples says why the first few failed.
type Result struct {
	Planned    int         // Rate × Duration
	Sent       int         // requests started (Planned unless ctx ended)
	OK         int         // 2xx and 3xx
	ByStatus   map[int]int // every other status, by code
	Status5xx  int         // the 5xx among ByStatus
	ConnErrors int         // refused, reset, closed before the whole body
	Timeouts   int         // no whole response within Timeout
	Canceled   int         // cut short by the caller's ctx: not a failure
	Samples    []string    // the first MaxSamples failures, in order seen
	// Latency of the requests that got a whole response (any status).
	P50, P95, P99, Max time.Duration
	Elapsed            time.Duration
}

// Failed is every request lost: a non-2xx/3xx status, a connection error
// or a timeout.
func (r Result) Failed() int {
	n := r.ConnErrors + r.Timeouts
	for _, v := range r.ByStatus {
		n += v
	}
	return n
}

// String is one line for a test log: counts, failures by kind, latency,
// and the error samples.
func (r Result) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sent %d/%d in %v: ok %d, failed %d (5xx %d, conn %d, timeout %d",
		r.Sent, r.Planned, r.Elapsed.Round(time.Millisecond), r.OK, r.Failed(), r.Status5xx, r.ConnErrors, r.Timeouts)
	codes := make([]int, 0, len(r.ByStatus))
	for c := range r.ByStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	for _, c := range codes {
		fmt.Fprintf(&b, ", %d×%d", r.ByStatus[c], c)
	}
	fmt.Fprintf(&b, "), canceled %d; latency p50 %v p95 %v p99 %v max %v",
		r.Canceled, r.P50, r.P95, r.P99, r.Max)
	if len(r.Samples) > 0 {
		fmt.Fprintf(&b, "; first failures: %s", strings.Join(r.Samples, " | "))
	}
	return b.String()
}

// recorder gathers outcomes from the request goroutines.
type recorder struct {
	mu         sync.Mutex
	r          Result
	lat        []time.Duration
	maxSamples int
}

func newRecorder(maxSamples, planned int) *recorder {
	return &recorder{
		r:          Result{Planned: planned, ByStatus: map[int]int{}},
		lat:        make([]time.Duration, 0, planned),
		maxSamples: maxSamples,
	}
}

func (rc *recorder) add(o outcome) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	r := &rc.r
	r.Sent++
	switch o.kind {
	case kindOK:
		r.OK++
	case kindStatus:
		r.ByStatus[o.code]++
		if o.code >= 500 {
			r.Status5xx++
		}
	case kindTimeout:
		r.Timeouts++
	case kindConn:
		r.ConnErrors++
	case kindCanceled:
		r.Canceled++
		return
	}
	if o.kind == kindOK || o.kind == kindStatus {
		rc.lat = append(rc.lat, o.latency)
	}
	if o.kind != kindOK && len(r.Samples) < rc.maxSamples {
		// The send time tells which phase of a scaling run lost it.
		r.Samples = append(r.Samples, fmt.Sprintf("+%v %v", o.at.Round(time.Millisecond), o.err))
	}
}

// result computes the percentiles (nearest rank) once every request ended.
func (rc *recorder) result() Result {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	r := rc.r
	slices.Sort(rc.lat)
	pct := func(p float64) time.Duration {
		if len(rc.lat) == 0 {
			return 0
		}
		i := int(p*float64(len(rc.lat))+0.999999) - 1
		return rc.lat[min(max(i, 0), len(rc.lat)-1)]
	}
	r.P50, r.P95, r.P99, r.Max = pct(0.50), pct(0.95), pct(0.99), pct(1)
	return r
}
