package source

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// TypeNone is a service pool's source when it has no queue
// (config.SourceNone): its decisions come from its rules and the CPU
// signal, never from a queue.
const TypeNone = config.SourceNone

// NoneSettings are the none type's keys: it has none.
type NoneSettings struct{}

func init() {
	define(config.SourceType{
		Name: TypeNone,
		Doc: "No queue: the pool is a service's replicas that scale on their trigger rules (promql() against the " +
			"daemon's [prometheus], the host's and workers' signals) and the CPU signal. A service pool with no " +
			"source table has it; a pool of queue workers cannot.",
	}, 0, func(*config.SourceDecoder) NoneSettings { return NoneSettings{} },
		func(NoneSettings) (Source, error) { return noneSource{}, nil })
}

// noneSource reads nothing. Its empty counts are never read as "no work":
// the policy knows the pool has no queue (policy.Params.NoQueue) and
// leaves the queue's signals out, so that the absence of a queue neither
// holds the pool for ever nor scales it down.
type noneSource struct{}

func (noneSource) Observe(context.Context, time.Time) (Counts, error) { return Counts{}, nil }
func (noneSource) Close() error                                       { return nil }
