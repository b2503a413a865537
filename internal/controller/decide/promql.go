package decide

// The server that runs the rules' promql(): the pool's source when it is
// a prometheus source, else the daemon's [prometheus], which the pool's
// configuration carries (config.Pool.Prometheus) when its rules use it.

import (
	"reflect"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// openPromQL opens the daemon-level server cfg's rules query; nil when
// they query none, or the pool's own source.
func openPromQL(open func(config.Prometheus) source.PromQL, cfg *config.Pool) source.PromQL {
	if cfg.Prometheus == nil {
		return nil
	}
	if open == nil {
		open = source.NewPromQL
	}
	return open(*cfg.Prometheus)
}

// updatePromQL follows a reload: a changed server is reopened. A read of
// the old one still under way ends on its own timeout; Close only drops
// its idle connections.
func (l *Local) updatePromQL(cfg *config.Pool) {
	if reflect.DeepEqual(l.cfg.Prometheus, cfg.Prometheus) {
		return
	}
	if l.prom != nil {
		l.prom.Close()
	}
	l.prom = openPromQL(l.opts.NewPromQL, cfg)
}

// querier is what runs this pool's promql(): its source if that serves
// promql() (a prometheus source queries its own server), else the daemon's.
func (l *Local) querier(src source.Source) source.Querier {
	if q, ok := source.As[source.Querier](src); ok {
		return q
	}
	if l.prom != nil {
		return l.prom
	}
	return nil
}
