package controller

import (
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// openSource opens a pool's source, guarded whatever opened it (source.New
// guards its own; a test's fake is guarded here): a panic in the source is
// an error of that pool alone, which holds as for any outage, and the
// first one is logged with its stack, once for this source, so that the
// journal has what a bug report needs without a stack at every tick.
func openSource(open func(config.Source) (source.Source, error), cfg *config.Pool, log *eventlog.Logger) (source.Source, error) {
	src, err := open(cfg.Source)
	if err != nil {
		return nil, err
	}
	return source.Guard(src, cfg.Source.Type, func(pe *source.PanicError) {
		log.Event(eventlog.SourceError, eventlog.Err,
			eventlog.Fields{"FLEXIQ_ERROR": pe.Error(), "FLEXIQ_STACK": string(pe.Stack)},
			"%v; the pool holds as for any source error (the stack, logged once for this source, follows)\n%s", pe, pe.Stack)
	}), nil
}
