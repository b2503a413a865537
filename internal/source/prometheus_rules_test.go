package source

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestPrometheusConditions(t *testing.T) {
	_, url := promServer(t, map[string]string{
		"one":     promVector("1"),
		"zero":    promVector("0"),
		"some":    promVector("0", "0", "2"),
		"empty":   promEmpty,
		"scalar0": promScalar("0"),
		"scalar":  promScalar("0.5"),
		"nan":     promVector("NaN"),
		"matrix":  `{"resultType":"matrix","result":[]}`,
	})
	src, err := New(config.Source{Type: TypePrometheus, Settings: PrometheusSettings{Conn: config.Conn{URL: url}, PendingQuery: "one"}})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	q, ok := As[Querier](src)
	if !ok {
		t.Fatal("the prometheus source runs no conditions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got := q.Conditions(ctx, []string{"one", "zero", "some", "empty", "scalar0", "scalar", "nan", "matrix", "broken("})
	for _, tt := range []struct {
		q     string
		fires bool
		err   string
	}{
		{"one", true, ""},
		{"zero", false, ""},
		{"some", true, ""},
		{"empty", false, ""},
		{"scalar0", false, ""},
		{"scalar", true, ""},
		{"nan", false, "NaN"},
		{"matrix", false, "range vector"},
		{"broken(", false, "parse error"},
	} {
		r := got[tt.q]
		if r.Fires != tt.fires || (tt.err == "") != (r.Err == nil) || (r.Err != nil && !strings.Contains(r.Err.Error(), tt.err)) {
			t.Errorf("%s: fires %t err %v, want %t %q", tt.q, r.Fires, r.Err, tt.fires, tt.err)
		}
		if r.Err != nil && !strings.Contains(r.Err.Error(), url) {
			t.Errorf("%s: error %q does not name the server", tt.q, r.Err)
		}
	}
}

// The daemon-level server runs conditions as a prometheus source does, and
// a server that is down is an error of each condition (which holds the
// pool), never a "does not fire".
func TestDaemonPromQL(t *testing.T) {
	_, url := promServer(t, map[string]string{"up": promVector("1"), "low": promVector("0")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name, url string
		want      map[string]bool // query: fires; absent: an error
	}{
		{"up", url, map[string]bool{"up": true, "low": false}},
		{"down", "http://127.0.0.1:1", map[string]bool{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := NewPromQL(config.Prometheus{Conn: config.Conn{URL: tc.url}})
			defer q.Close()
			got := q.Conditions(ctx, []string{"up", "low"})
			for _, query := range []string{"up", "low"} {
				r := got[query]
				fires, ok := tc.want[query]
				if (r.Err == nil) != ok || r.Fires != fires {
					t.Errorf("%s: fires %t err %v, want fires %t, error %t", query, r.Fires, r.Err, fires, !ok)
				}
			}
		})
	}
}
