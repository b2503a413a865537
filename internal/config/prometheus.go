package config

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Prometheus is the daemon-level [prometheus] table: the server that the
// promql() of any pool's trigger rules queries when the pool's own source
// does not serve promql() (only a prometheus source does, against its own
// server). A service pool can so scale on its replicas' own metrics,
// scraped through its file_sd file, whatever feeds its queue, or with no
// queue at all.
type Prometheus struct {
	// Conn is where the server is, with the same keys and checks as a
	// prometheus source's: http or https, the password out of the URL.
	Conn
	// ScrapeInterval is the server's scrape interval, against which the
	// range windows of promql() are checked; default DefaultScrapeInterval.
	ScrapeInterval time.Duration `toml:"scrape_interval_sec,omitzero"`
}

// PromQLScrapeInterval implements PromQLSource.
func (p Prometheus) PromQLScrapeInterval() time.Duration { return p.ScrapeInterval }

var prometheusKeys = TableDoc{
	Name:  "prometheus",
	Title: "Prometheus for trigger rules: `[prometheus]`",
	Doc: "```toml\n" +
		"[prometheus]\n" +
		"url = \"http://127.0.0.1:9090\"\n" +
		"scrape_interval_sec = 15\n" +
		"```\n" +
		"\n" +
		"The Prometheus server (or anything that serves its HTTP API) that the\n" +
		"`promql()` of any pool's trigger rules queries. A pool whose source is\n" +
		"`type = \"prometheus\"` keeps querying its own source's server; every other\n" +
		"pool (a queue of another type, or a service pool with no queue source) uses\n" +
		"this one. Without it, a rule with `promql()` in such a pool is a\n" +
		"configuration error. The connection keys and their checks are the\n" +
		"prometheus source's: the URL is http:// or https://, a password goes to\n" +
		"`password_file` or `password_credential` and is sent as HTTP basic\n" +
		"authentication. A query that fails, or a server that is down, holds the\n" +
		"pool as every failed `promql()` does: missing data never scales a pool\n" +
		"down.",
	Keys: append(slices.Clone(ConnKeys),
		KeyDoc{Name: "scrape_interval_sec", Type: "seconds", Default: "15", Limits: "`> 0`",
			Doc: "The server's scrape interval, against which the range windows of promql() rules are checked."}),
}

// prometheus reads the [prometheus] table, through the decoder the source
// types use, so that its keys are checked exactly as a prometheus source's.
func (l *loader) prometheus(r rawSourceTable) *Prometheus {
	if r == nil {
		return nil
	}
	key := func(k string) string { return "prometheus." + k }
	names := make([]string, len(prometheusKeys.Keys))
	for i, k := range prometheusKeys.Keys {
		names[i] = k.Name
	}
	mine := rawSourceTable{}
	for _, k := range slices.Sorted(maps.Keys(r)) {
		if !slices.Contains(names, k) {
			l.add(key(k), "unknown key (want %s)", strings.Join(names, ", "))
			continue
		}
		mine[k] = r[k]
	}
	p := &Prometheus{ScrapeInterval: DefaultScrapeInterval}
	d := &SourceDecoder{l: l.reader, typ: "prometheus", key: key, keys: mine}
	d.Conn(&p.Conn, "http", "https")
	if d.Seconds("scrape_interval_sec", &p.ScrapeInterval) && p.ScrapeInterval <= 0 {
		d.Errorf("scrape_interval_sec", "must be > 0: the server's scrape interval, which promql() range windows are checked against")
		p.ScrapeInterval = DefaultScrapeInterval
	}
	return p
}

// promQLServer is the server a pool's promql() queries: its source's when
// that serves promql(), else the daemon's [prometheus], which the pool then
// keeps (Pool.Prometheus) for the controller. nil when there is none.
func (l *loader) promQLServer(p *Pool) PromQLSource {
	if prom, ok := p.Source.Settings.(PromQLSource); ok {
		return prom
	}
	if l.prom != nil {
		p.Prometheus = l.prom
		return *l.prom
	}
	return nil
}
