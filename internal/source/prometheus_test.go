package source

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// fakeProm answers /api/v1/query with the canned data for each query, as
// Prometheus's HTTP API does ({"status":"success","data":...}). A query
// missing from the map is an error from the server.
type fakeProm struct {
	mu      sync.Mutex
	answers map[string]string
	// seen records each request's query, timeout and basic auth.
	seen []promRequest
	hang time.Duration
}

type promRequest struct{ query, timeout, user, password string }

func (f *fakeProm) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/api/v1/query" {
		http.NotFound(w, r)
		return
	}
	r.ParseForm()
	q := r.Form.Get("query")
	user, pw, _ := r.BasicAuth()
	f.mu.Lock()
	f.seen = append(f.seen, promRequest{q, r.Form.Get("timeout"), user, pw})
	data, ok := f.answers[q]
	hang := f.hang
	f.mu.Unlock()
	if hang > 0 {
		select {
		case <-time.After(hang):
		case <-r.Context().Done():
			return
		}
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"status":"error","errorType":"bad_data","error":"1:1: parse error: unexpected %s"}`, q)
		return
	}
	fmt.Fprintf(w, `{"status":"success","data":%s}`, data)
}

func promServer(t *testing.T, answers map[string]string) (*fakeProm, string) {
	f := &fakeProm{answers: answers}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

const (
	promEmpty = `{"resultType":"vector","result":[]}`
)

func promVector(values ...string) string {
	var samples []string
	for i, v := range values {
		samples = append(samples, fmt.Sprintf(`{"metric":{"__name__":"q","instance":"i%d"},"value":[1700000000.5,"%s"]}`, i, v))
	}
	return `{"resultType":"vector","result":[` + strings.Join(samples, ",") + `]}`
}

func promScalar(v string) string {
	return `{"resultType":"scalar","result":[1700000000.5,"` + v + `"]}`
}

// Each shape of result, and what empty_result makes of an empty one.
func TestPrometheusResults(t *testing.T) {
	const matrix = `{"resultType":"matrix","result":[{"metric":{},"values":[[1700000000,"1"],[1700000001,"2"]]}]}`
	const str = `{"resultType":"string","result":[1700000000,"hello"]}`
	for _, tt := range []struct {
		name    string
		pending string // the pending query's result
		running string // "" = no running_query
		oldest  string // "" = no oldest_age_query
		empty   string
		want    Counts
		wantErr []string
	}{
		{name: "vector of one", pending: promVector("7"), running: promVector("2"), want: Counts{Pending: 7, Running: 2}},
		{name: "scalar", pending: promScalar("5"), running: promScalar("0"), want: Counts{Pending: 5}},
		{name: "no running query", pending: promVector("3"), want: Counts{Pending: 3}},
		{name: "fraction rounds to nearest", pending: promVector("2.4"), running: promVector("1.5"), want: Counts{Pending: 2, Running: 2}},
		{name: "empty reads as zero by default", pending: promEmpty, running: promVector("1"), want: Counts{Running: 1}},
		{name: "empty reads as zero", pending: promEmpty, running: promEmpty, empty: EmptyZero, want: Counts{}},
		{name: "empty holds", pending: promVector("4"), running: promEmpty, empty: EmptyHold,
			wantErr: []string{"running_query sum(running)", "returned no sample", `empty_result = "hold"`}},
		{name: "two series", pending: promVector("1", "2"), running: promVector("0"),
			wantErr: []string{"pending_query sum(pending)", "returned 2 series", `instance="i1"`, "aggregate"}},
		{name: "NaN holds", pending: promVector("NaN"), running: promVector("0"), empty: EmptyZero,
			wantErr: []string{"pending_query", "NaN"}},
		{name: "scalar NaN holds", pending: promScalar("1"), running: promScalar("NaN"), wantErr: []string{"running_query", "NaN"}},
		{name: "infinity holds", pending: promVector("+Inf"), wantErr: []string{"pending_query", "out of range"}},
		{name: "negative holds", pending: promVector("-1"), wantErr: []string{"pending_query", "cannot be negative"}},
		{name: "matrix", pending: matrix, wantErr: []string{"pending_query", "range vector"}},
		{name: "string", pending: str, wantErr: []string{"pending_query", "string"}},
		{name: "server refuses the query", pending: "", wantErr: []string{"pending_query sum(pending)", "bad_data", "parse error"}},
		{name: "oldest age", pending: promVector("3"), running: promVector("1"), oldest: promVector("12.5"),
			want: Counts{Pending: 3, Running: 1, OldestAge: 12500 * time.Millisecond, HasOldest: true}},
		{name: "oldest age without pending", pending: promVector("0"), oldest: promVector("12.5"), want: Counts{}},
		{name: "oldest age empty", pending: promVector("3"), oldest: promEmpty, want: Counts{Pending: 3}},
		{name: "oldest age empty holds", pending: promVector("3"), oldest: promEmpty, empty: EmptyHold,
			wantErr: []string{"oldest_age_query", "no sample"}},
		{name: "oldest age negative", pending: promVector("3"), oldest: promVector("-4"), wantErr: []string{"oldest_age_query", "an age cannot be negative"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			answers := map[string]string{}
			settings := PrometheusSettings{PendingQuery: "sum(pending)", EmptyResult: tt.empty}
			if tt.pending != "" {
				answers["sum(pending)"] = tt.pending
			}
			if tt.running != "" {
				settings.RunningQuery = "sum(running)"
				answers["sum(running)"] = tt.running
			}
			if tt.oldest != "" {
				settings.OldestAgeQuery = "time() - min(oldest)"
				answers["time() - min(oldest)"] = tt.oldest
			}
			_, settings.URL = promServer(t, answers)
			spec := config.Source{Type: TypePrometheus, Settings: settings}
			got, err := mustNew(t, spec).Observe(context.Background(), time.Now())
			if tt.wantErr != nil {
				wantErrContaining(t, err, append(tt.wantErr, "prometheus source "+settings.URL)...)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The paused query is reported apart from pending.
func TestPrometheusPaused(t *testing.T) {
	_, u := promServer(t, map[string]string{"p": promVector("2"), "r": promVector("1"), "z": promVector("40")})
	s := mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: u},
		PendingQuery: "p", RunningQuery: "r", PausedQuery: "z"}})
	got, err := s.Observe(context.Background(), time.Now())
	if err != nil || got != (Counts{Pending: 2, Running: 1, Paused: 40}) {
		t.Errorf("got %+v, %v", got, err)
	}
}

// A server that is not there, or that does not answer within the tick, is
// a hold naming the server; the tick's deadline goes to the server as the
// query's timeout.
func TestPrometheusUnreachableAndSlow(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	down := srv.URL
	srv.Close()
	s := mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: down}, PendingQuery: "q"}})
	_, err := s.Observe(context.Background(), time.Now())
	wantErrContaining(t, err, "prometheus source "+down, "pending_query q", "connection refused")

	f, u := promServer(t, map[string]string{"q": promVector("1")})
	f.hang = time.Minute
	s = mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: u}, PendingQuery: "q", RunningQuery: "q"}})
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = s.Observe(ctx, time.Now())
	wantErrContaining(t, err, "prometheus source "+u, "deadline exceeded")
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("a query against a hung server took %s, want about the tick's 300ms", d)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) != 2 || f.seen[0].timeout == "" {
		t.Errorf("requests %+v: want two queries, each with the tick's timeout", f.seen)
	}
}

// A password from password_file goes as basic authentication and never
// into an error message.
func TestPrometheusPassword(t *testing.T) {
	f, u := promServer(t, map[string]string{"q": promVector("1")})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	withUser := strings.Replace(u, "http://", "http://metrics@", 1)
	s := mustNew(t, config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: withUser, PasswordFile: pw},
		PendingQuery: "q", RunningQuery: "bad query"}})
	_, err := s.Observe(context.Background(), time.Now())
	wantErrContaining(t, err, "running_query bad query", "metrics:xxxxx@")
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("the error shows the password: %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.seen {
		if r.user != "metrics" || r.password != "s3cret" {
			t.Errorf("request for %q had basic auth %q:%q", r.query, r.user, r.password)
		}
	}
}

// The timeout sent to the server is in whole units, which Prometheus 2
// parses ("996.3ms" and "1.5s" it refuses).
func TestServerTimeout(t *testing.T) {
	for d, want := range map[time.Duration]string{
		996327626 * time.Nanosecond: "996ms",
		1500 * time.Millisecond:     "1s",
		29999 * time.Millisecond:    "29s",
		30 * time.Second:            "30s",
		500 * time.Microsecond:      "0s",
	} {
		if got := serverTimeout(d).String(); got != want {
			t.Errorf("serverTimeout(%s) = %s, want %s", d, got, want)
		}
	}
}
