package daemon

import (
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// applyCapacity caps the pools' max_workers at what fits on this host,
// logging a capacity-capped event for each, and returns the budget the
// pools' ledger holds them to at run time. A host that cannot be read
// leaves the pools as written and the budget open.
func applyCapacity(log *eventlog.Logger, cfg *config.Config) capacity.Budget {
	for _, c := range config.ApplyCapacity(cfg) {
		// A fleet pool's max_workers is the fleet's: what is capped is
		// this host's capacity for it (Key "fleet.capacity").
		key := c.Key
		if key == "" {
			key = "max_workers"
		}
		log.With("pool", c.Pool).Event(eventlog.CapacityCapped, eventlog.Warning, eventlog.Fields{
			"FLEXIQ_MAX_WORKERS": fmt.Sprint(c.From), "FLEXIQ_CAPPED_AT": fmt.Sprint(c.To), "FLEXIQ_KEY": key},
			"%s = %d is above capacity: %s; capped at %d", key, c.From, c.Why, c.To)
	}
	h, err := capacity.ReadHost()
	if err != nil {
		log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "capacity: %v; starts are not held to the host's size", err)
		return capacity.Budget{Cores: 1e12, Memory: ^uint64(0), Workers: cfg.Capacity.MaxTotalWorkers}
	}
	return cfg.Budget(h)
}
