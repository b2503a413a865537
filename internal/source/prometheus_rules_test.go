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
	q, ok := src.(Querier)
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
