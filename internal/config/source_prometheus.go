package config

import (
	"strings"
	"time"
)

// SourcePrometheus reads pending and running from instant PromQL queries
// against a Prometheus server (or anything that serves its HTTP API).
const SourcePrometheus = "prometheus"

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

// Prometheus holds the settings of the prometheus source type. Each query is
// an instant query that must return a single element: a vector of one
// sample, or a scalar.
type Prometheus struct {
	PendingQuery   string // required: the jobs ready to run now
	RunningQuery   string // optional: the jobs in hand; without it running is 0
	PausedQuery    string // optional: jobs held back by a pause, reported apart
	OldestAgeQuery string // optional: the oldest pending job's age, in seconds
	EmptyResult    string // EmptyZero or EmptyHold; set for prometheus sources only
	// ScrapeInterval is the server's scrape interval, against which the
	// range windows of promql() rules are checked; 0 means
	// DefaultScrapeInterval.
	ScrapeInterval time.Duration
}

// rawPrometheus holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawPrometheus struct {
	PendingQuery   value `toml:"pending_query"`
	RunningQuery   value `toml:"running_query"`
	PausedQuery    value `toml:"paused_query"`
	OldestAgeQuery value `toml:"oldest_age_query"`
	EmptyResult    value `toml:"empty_result"`
	ScrapeInterval value `toml:"scrape_interval_sec"`
}

// effectivePrometheus is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectivePrometheus struct {
	PendingQuery   string  `toml:"pending_query,omitempty"`
	RunningQuery   string  `toml:"running_query,omitempty"`
	PausedQuery    string  `toml:"paused_query,omitempty"`
	OldestAgeQuery string  `toml:"oldest_age_query,omitempty"`
	EmptyResult    string  `toml:"empty_result,omitempty"`
	ScrapeInterval float64 `toml:"scrape_interval_sec,omitzero"`
}

func (s Source) effectivePrometheus() effectivePrometheus {
	p := s.Prometheus
	return effectivePrometheus{
		PendingQuery: p.PendingQuery, RunningQuery: p.RunningQuery, PausedQuery: p.PausedQuery,
		OldestAgeQuery: p.OldestAgeQuery, EmptyResult: p.EmptyResult, ScrapeInterval: p.ScrapeInterval.Seconds(),
	}
}

func init() {
	registerSource(sourceKind{
		name:  SourcePrometheus,
		keys:  append([]string{"pending_query", "running_query", "paused_query", "oldest_age_query", "empty_result", "scrape_interval_sec"}, connKeys...),
		check: checkPrometheus,
	})
}

// checkPrometheus checks a prometheus source: the server's URL (http or
// https; a password goes to password_file or password_credential and is sent
// as HTTP basic authentication with the URL's user name), the queries, and
// what an empty result means.
func checkPrometheus(l *loader, s *Source, r *rawSource, key func(string) string) {
	l.conn(s, r, key, "http", "https")
	p := &s.Prometheus
	if !r.PendingQuery.set() {
		l.add(key("pending_query"), "missing: the PromQL query whose single sample is the number of jobs ready to run now")
	}
	for _, q := range []struct {
		name string
		v    value
		dst  *string
	}{
		{"pending_query", r.PendingQuery, &p.PendingQuery},
		{"running_query", r.RunningQuery, &p.RunningQuery},
		{"paused_query", r.PausedQuery, &p.PausedQuery},
		{"oldest_age_query", r.OldestAgeQuery, &p.OldestAgeQuery},
	} {
		if l.str(key(q.name), q.v, q.dst) && strings.TrimSpace(*q.dst) == "" {
			l.add(key(q.name), "must not be empty (leave the key out instead)")
		}
	}
	if l.seconds(key("scrape_interval_sec"), r.ScrapeInterval, &p.ScrapeInterval) && p.ScrapeInterval <= 0 {
		l.add(key("scrape_interval_sec"), "must be > 0: the server's scrape interval, which promql() range windows are checked against")
		p.ScrapeInterval = 0
	}
	p.EmptyResult = EmptyZero
	if l.str(key("empty_result"), r.EmptyResult, &p.EmptyResult) && p.EmptyResult != EmptyZero && p.EmptyResult != EmptyHold {
		l.add(key("empty_result"), "%q: want %q (an empty result reads as 0, as KEDA does) or %q (an empty result holds the pool)",
			p.EmptyResult, EmptyZero, EmptyHold)
		p.EmptyResult = EmptyZero
	}
}
