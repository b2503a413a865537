package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
)

// TypePrometheus reads the counts from instant PromQL queries against a
// Prometheus server (or anything that serves its HTTP API).
const TypePrometheus = "prometheus"

// What a prometheus source does with a query that returns no sample at all
// (a series that is not exported yet, or went stale).
const (
	// EmptyZero reads it as 0, as KEDA's prometheus scaler does by default
	// (ignoreNullValues: true): a queue gauge that is only exported once
	// work exists reads as no work.
	EmptyZero = "zero"
	// EmptyHold makes it a hold, as a failed query is: for a gauge that is
	// always exported, an empty result means a lost target.
	EmptyHold = "hold"
)

// PrometheusSettings are a prometheus source's keys. Each query is an
// instant query that must return a single element: a vector of one
// sample, or a scalar.
type PrometheusSettings struct {
	config.Conn
	PendingQuery   string `toml:"pending_query,omitempty"`    // required: the jobs ready to run now
	RunningQuery   string `toml:"running_query,omitempty"`    // optional: the jobs in hand; without it running is 0
	PausedQuery    string `toml:"paused_query,omitempty"`     // optional: jobs held back by a pause, reported apart
	OldestAgeQuery string `toml:"oldest_age_query,omitempty"` // optional: the oldest pending job's age, in seconds
	EmptyResult    string `toml:"empty_result,omitempty"`     // EmptyZero or EmptyHold
	// ScrapeInterval is the server's scrape interval, against which the
	// range windows of promql() rules are checked; 0 means
	// config.DefaultScrapeInterval.
	ScrapeInterval time.Duration `toml:"scrape_interval_sec,omitzero"`
}

// PromQLScrapeInterval implements config.PromQLSource.
func (s PrometheusSettings) PromQLScrapeInterval() time.Duration { return s.ScrapeInterval }

func init() {
	query := func(name, what string) config.KeyDoc {
		return config.KeyDoc{Name: name, Type: "string", Limits: "not blank", Doc: what}
	}
	define(config.SourceType{
		Name: TypePrometheus,
		Doc: "Reads the counts from instant PromQL queries against a Prometheus server, or anything that serves " +
			"its HTTP API, as KEDA's prometheus scaler does: each query must return a single element, a vector " +
			"of one sample or a scalar. The URL is http:// or https://; a password is sent as HTTP basic " +
			"authentication with the URL's user name. Trigger rules may use promql() against the same server.",
		Keys: append(slices.Clone(config.ConnKeys),
			config.KeyDoc{Name: "pending_query", Type: "string", Required: true, Limits: "not blank",
				Doc: "The query whose single sample is the number of jobs ready to run now."},
			query("running_query", "The jobs in hand; without it, running is 0."),
			query("paused_query", "Jobs held back by a pause, reported apart and never demand."),
			query("oldest_age_query", "The oldest pending job's age in seconds, for the latency and burst-onset signals."),
			config.KeyDoc{Name: "empty_result", Type: "string", Default: `"zero"`, Limits: "one of zero, hold",
				Doc: "What a query that returns no sample means: `zero` reads it as 0, as KEDA does (a gauge exported " +
					"only once work exists); `hold` holds the pool, as a failed query does (a gauge always exported)."},
			config.KeyDoc{Name: "scrape_interval_sec", Type: "number", Default: "15", Limits: "> 0",
				Doc: "The server's scrape interval, against which the range windows of promql() rules are checked."},
		),
	}, Queries, decodePrometheus, func(s PrometheusSettings) (Source, error) { return newPrometheus(s) })
}

// decodePrometheus checks a prometheus source: the server's URL (http or
// https; a password goes to password_file or password_credential and is sent
// as HTTP basic authentication with the URL's user name), the queries, and
// what an empty result means.
func decodePrometheus(d *config.SourceDecoder) PrometheusSettings {
	var p PrometheusSettings
	d.Conn(&p.Conn, "http", "https")
	if !d.Has("pending_query") {
		d.Errorf("pending_query", "missing: the PromQL query whose single sample is the number of jobs ready to run now")
	}
	for _, q := range []struct {
		name string
		dst  *string
	}{
		{"pending_query", &p.PendingQuery},
		{"running_query", &p.RunningQuery},
		{"paused_query", &p.PausedQuery},
		{"oldest_age_query", &p.OldestAgeQuery},
	} {
		if d.String(q.name, q.dst) && strings.TrimSpace(*q.dst) == "" {
			d.Errorf(q.name, "must not be empty (leave the key out instead)")
		}
	}
	if d.Seconds("scrape_interval_sec", &p.ScrapeInterval) && p.ScrapeInterval <= 0 {
		d.Errorf("scrape_interval_sec", "must be > 0: the server's scrape interval, which promql() range windows are checked against")
		p.ScrapeInterval = 0
	}
	p.EmptyResult = EmptyZero
	if d.String("empty_result", &p.EmptyResult) && p.EmptyResult != EmptyZero && p.EmptyResult != EmptyHold {
		d.Errorf("empty_result", "%q: want %q (an empty result reads as 0, as KEDA does) or %q (an empty result holds the pool)",
			p.EmptyResult, EmptyZero, EmptyHold)
		p.EmptyResult = EmptyZero
	}
	return p
}

// prometheusSource runs one instant query per count against a Prometheus
// server's HTTP API (client_golang's v1 client), as KEDA's prometheus
// scaler does, with its rules: a result must be a single element, and an
// empty one reads as 0 unless empty_result says "hold".
type prometheusSource struct {
	conn config.Conn
	spec PrometheusSettings
	// transport keeps the connections to the server across ticks; a broken
	// one is dropped and redialled by net/http itself.
	transport *http.Transport
}

func newPrometheus(spec PrometheusSettings) (*prometheusSource, error) {
	if strings.TrimSpace(spec.PendingQuery) == "" {
		return nil, fmt.Errorf("%s source: pending_query is empty", TypePrometheus)
	}
	p := spec
	if p.EmptyResult == "" {
		p.EmptyResult = EmptyZero
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 4 // the queries of one tick run side by side
	return &prometheusSource{conn: spec.Conn, spec: p, transport: t}, nil
}

// promQuery is one of the source's queries, by its key.
type promQuery struct {
	key, query string
}

// promResult is what one query gave: a value, or no sample at all.
type promResult struct {
	value float64
	empty bool
	err   error
}

// api is the server's v1 API, and its URL as errors may show it. The URL
// (and password) is read at every tick, so that a rotated credential needs
// no reload.
func (s *prometheusSource) api() (promv1.API, string, error) {
	u, err := conn.URL(s.conn)
	if err != nil {
		return nil, "", fmt.Errorf("%s source: %w", TypePrometheus, err)
	}
	server := conn.Redacted(u)
	var rt http.RoundTripper = limitBody{next: s.transport, limit: promMaxBody}
	if u.User != nil {
		// As HTTP basic authentication rather than in the URL, so that no
		// error message can carry it, and to the configured server only.
		pw, _ := u.User.Password()
		rt = basicAuth{next: rt, scheme: u.Scheme, host: u.Host, user: u.User.Username(), password: pw}
		u.User = nil
	}
	client, err := api.NewClient(api.Config{
		Address: u.String(),
		Client:  &http.Client{Transport: rt, CheckRedirect: sameServer},
	})
	if err != nil {
		return nil, "", fmt.Errorf("%s source %s: %w", TypePrometheus, server, err)
	}
	return promv1.NewAPI(client), server, nil
}

func (s *prometheusSource) Observe(ctx context.Context, _ time.Time) (Counts, error) {
	v1, server, err := s.api()
	if err != nil {
		return Counts{}, err
	}
	queries := []promQuery{{"pending_query", s.spec.PendingQuery}}
	for _, q := range []promQuery{
		{"running_query", s.spec.RunningQuery},
		{"paused_query", s.spec.PausedQuery},
		{"oldest_age_query", s.spec.OldestAgeQuery},
	} {
		if q.query != "" {
			queries = append(queries, q)
		}
	}
	// Side by side, so that each query has the whole of the tick's time:
	// the context's deadline is the per-query timeout.
	results := make([]promResult, len(queries))
	var wg sync.WaitGroup
	for i, q := range queries {
		wg.Go(func() { results[i] = instant(ctx, v1, q.query) })
	}
	wg.Wait()

	var c Counts
	var oldest promResult
	for i, q := range queries {
		r := results[i]
		if r.err == nil && r.empty && s.spec.EmptyResult == EmptyHold {
			r.err = errors.New(`returned no sample (empty_result = "hold"; "zero" reads that as 0)`)
		}
		if r.err == nil && !r.empty {
			r.err = checkValue(q.key, r.value)
		}
		if r.err != nil {
			return Counts{}, fmt.Errorf("%s source %s: %s %s: %w", TypePrometheus, server, q.key, q.query, r.err)
		}
		n := int64(math.Round(r.value)) // 0 when empty
		switch q.key {
		case "pending_query":
			c.Pending = n
		case "running_query":
			c.Running = n
		case "paused_query":
			c.Paused = n
		case "oldest_age_query":
			oldest = r
		}
	}
	if c.Pending > 0 && oldest.err == nil && !oldest.empty && s.spec.OldestAgeQuery != "" {
		c.OldestAge = time.Duration(oldest.value * float64(time.Second))
		c.HasOldest = true
	}
	return c, nil
}

// maxPromValue bounds a count or an age: beyond 2^53 a float64 no longer
// holds whole numbers, and no queue is that long.
const maxPromValue = 1 << 53

// checkValue refuses what no count or age can be: NaN (a division by zero
// in the query, say), an infinity, a negative number. Each is a hold.
func checkValue(key string, v float64) error {
	switch {
	case math.IsNaN(v):
		return errors.New("returned NaN")
	case math.IsInf(v, 0) || math.Abs(v) > maxPromValue:
		return fmt.Errorf("returned %g, out of range", v)
	case v < 0:
		what := "a count"
		if key == "oldest_age_query" {
			what = "an age"
		}
		return fmt.Errorf("returned %g: %s cannot be negative", v, what)
	}
	return nil
}

// instant runs one instant query at the server's own time (so that time()
// in a query is the server's clock, not ours), asking the server to give up
// when the tick's deadline comes.
func instant(ctx context.Context, v1 promv1.API, query string) promResult {
	val, err := instantValue(ctx, v1, query)
	if err != nil {
		return promResult{err: err}
	}
	return single(val)
}

// instantValue runs one instant query, as instant does, and returns its
// result whatever its shape.
func instantValue(ctx context.Context, v1 promv1.API, query string) (model.Value, error) {
	var opts []promv1.Option
	if deadline, ok := ctx.Deadline(); ok {
		if d := serverTimeout(time.Until(deadline)); d > 0 {
			opts = append(opts, promv1.WithTimeout(d))
		}
	}
	val, _, _, err := v1.Query(ctx, query, time.Time{}, opts...)
	return val, err
}

// serverTimeout is d as Prometheus's timeout parameter can take it: the
// client sends d.String(), and the server reads whole units ("996ms",
// "29s"), not "1.5s". Rounded down, so the server gives up first.
func serverTimeout(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Truncate(time.Second)
	}
	return d.Truncate(time.Millisecond)
}

// single reads a query's result, which must be a single element: a scalar
// or a vector of one sample. An empty vector is reported as such; the
// caller decides what it means.
func single(val model.Value) promResult {
	switch v := val.(type) {
	case *model.Scalar:
		return promResult{value: float64(v.Value)}
	case model.Vector:
		switch {
		case len(v) == 0:
			return promResult{empty: true}
		case len(v) > 1:
			series := make([]string, 0, 3)
			for _, s := range v[:min(len(v), 3)] {
				series = append(series, s.Metric.String())
			}
			more := ""
			if len(v) > 3 {
				more = ", ..."
			}
			return promResult{err: fmt.Errorf("returned %d series (%s%s), not one: aggregate them, e.g. sum(...)",
				len(v), strings.Join(series, ", "), more)}
		case v[0].Histogram != nil:
			return promResult{err: fmt.Errorf("returned a native histogram (%s), not a number", v[0].Metric)}
		}
		return promResult{value: float64(v[0].Value)}
	case model.Matrix:
		return promResult{err: errors.New("returned a range vector: an instant query must return one sample, e.g. max_over_time(x[1m]) rather than x[1m]")}
	case nil:
		return promResult{err: errors.New("returned no result")}
	}
	return promResult{err: fmt.Errorf("returned a %s, not a number", val.Type())}
}

func (s *prometheusSource) Close() error {
	s.transport.CloseIdleConnections()
	return nil
}

// basicAuth sends HTTP basic authentication with every request to the
// configured server (scheme and host:port), and with no other: whatever
// the client is made to follow, the credentials go nowhere else.
type basicAuth struct {
	next           http.RoundTripper
	scheme, host   string
	user, password string
}

func (b basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != b.scheme || r.URL.Host != b.host {
		return b.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(r)
}

// sameServer is the client's redirect policy: a redirect on the configured
// server (a path prefix added by a proxy, say) is followed, as net/http
// does, up to 10; one to another host, port or scheme is refused. A
// Prometheus API has no reason to send its clients elsewhere, and a
// server that does may be handing them to someone who wants the
// credentials or who would answer with counts of their choosing.
func sameServer(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	switch {
	case req.URL.Scheme != first.Scheme || req.URL.Host != first.Host:
		return fmt.Errorf("refusing a redirect from %s://%s to another server (%s://%s)", first.Scheme, first.Host, req.URL.Scheme, req.URL.Host)
	case len(via) >= 10:
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

// promMaxBody bounds one response from the server. client_golang reads a
// whole body into memory, and a hostile or broken server can send any
// amount: 512 MiB made the daemon allocate 2 GiB. An instant query that
// returns a single sample (a count) is a few hundred bytes; a promql()
// condition of a trigger rule may return many series, and 1 MiB still
// holds some thousands of them. A condition that needs more should
// aggregate (count(...), max(...)) in the query.
const promMaxBody = 1 << 20

// limitBody fails a response whose body is larger than limit, rather than
// cutting it short: a truncated answer could parse as a smaller one.
type limitBody struct {
	next  http.RoundTripper
	limit int64
}

func (l limitBody) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := l.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	if resp.ContentLength > l.limit {
		resp.Body.Close()
		return nil, fmt.Errorf("the server announces a response of %d bytes, over the limit of %d", resp.ContentLength, l.limit)
	}
	resp.Body = &limitedBody{rc: resp.Body, left: l.limit}
	return resp, nil
}

// errBodyTooLarge is a response over promMaxBody.
var errBodyTooLarge = fmt.Errorf("the response is over the limit of %d bytes", promMaxBody)

// limitedBody reads at most left bytes of rc and fails at the first byte
// beyond.
type limitedBody struct {
	rc   io.ReadCloser
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errBodyTooLarge
	}
	// One byte more than is left, to tell a body of exactly the limit
	// from a longer one.
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return n - int(-b.left), errBodyTooLarge
	}
	return n, err
}

func (b *limitedBody) Close() error { return b.rc.Close() }
