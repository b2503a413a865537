package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"sync"

	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Querier is a source that can also run the promql() conditions of a
// pool's trigger rules (policy = "rules"): the prometheus source.
type Querier interface {
	// Conditions runs each query as an instant query, side by side within
	// ctx, and says for each whether it fires: as in the HPC platform's
	// design, any non-zero sample fires, an empty result does not, and an
	// error (or a NaN) is an error, which holds the pool.
	Conditions(ctx context.Context, queries []string) map[string]ConditionResult
}

// ConditionResult is one promql() condition's outcome.
type ConditionResult struct {
	Fires bool
	Err   error
}

func (s *prometheusSource) Conditions(ctx context.Context, queries []string) map[string]ConditionResult {
	out := make(map[string]ConditionResult, len(queries))
	v1, server, err := s.api()
	if err != nil {
		for _, q := range queries {
			out[q] = ConditionResult{Err: err}
		}
		return out
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, q := range queries {
		wg.Go(func() {
			fires, err := condition(ctx, v1, q)
			if err != nil {
				err = fmt.Errorf("%s %s: %w", TypePrometheus, server, err)
			}
			mu.Lock()
			out[q] = ConditionResult{Fires: fires, Err: err}
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// condition runs one query; unlike a count, a condition may return any
// number of series.
func condition(ctx context.Context, v1 promv1.API, query string) (bool, error) {
	val, err := instantValue(ctx, v1, query)
	if err != nil {
		return false, err
	}
	return fires(val)
}

// fires reads a condition's result: any non-zero sample fires.
func fires(val model.Value) (bool, error) {
	check := func(v float64) (bool, error) {
		if math.IsNaN(v) {
			return false, errors.New("returned NaN")
		}
		return v != 0, nil
	}
	switch v := val.(type) {
	case *model.Scalar:
		return check(float64(v.Value))
	case model.Vector:
		any := false
		for _, s := range v {
			if s.Histogram != nil {
				return false, fmt.Errorf("returned a native histogram (%s), not a number", s.Metric)
			}
			f, err := check(float64(s.Value))
			if err != nil {
				return false, fmt.Errorf("%s %w", s.Metric, err)
			}
			any = any || f
		}
		return any, nil
	case model.Matrix:
		return false, errors.New("returned a range vector: a condition must be an instant vector or a scalar")
	case nil:
		return false, errors.New("returned no result")
	}
	return false, fmt.Errorf("returned a %s, not a number", val.Type())
}

// PromQL is a Prometheus server that runs the promql() conditions of the
// pools whose source does not serve them: the daemon's [prometheus].
type PromQL interface {
	Querier
	Close() error
}

// NewPromQL returns the daemon-level server p, guarded as a source is. As
// with a source, it does not touch the server: one that is down is an
// error of each condition, which holds the pools that ask.
func NewPromQL(p config.Prometheus) PromQL {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 4 // the conditions of one tick run side by side
	s := &prometheusSource{conn: p.Conn, spec: PrometheusSettings{Conn: p.Conn, ScrapeInterval: p.ScrapeInterval}, transport: t}
	g := Guard(s, TypePrometheus, nil)
	q, _ := As[Querier](g)
	return guardedPromQL{Querier: q, Source: g}
}

// guardedPromQL is the daemon's [prometheus] through its guard.
type guardedPromQL struct {
	Querier
	Source
}
