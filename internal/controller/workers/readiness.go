package workers

// What stands between a wanted start and the start itself is the pool's
// admit.Gate (required units, start condition, the host's budget); these
// are the workers' few words with it.

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/admit"
)

// NewGate is the admission of ws's pool.
func NewGate(ws *Workers) *admit.Gate {
	return admit.New(admit.Hooks{Name: ws.name, Log: ws.log, Ledger: ws.ledger, Fields: ws.workerFields,
		States: func(ctx context.Context, names []string) (map[string]string, error) {
			return ws.units.UnitStates(ctx, names)
		},
		Timeout: callTimeout})
}

// admit returns how many of n wanted starts may go ahead now (why is the
// reason for them, e.g. "scale-up"). A start that does not fit the host's
// budget is skipped, not left pending: the target drops to what the pool
// will have, and the policy asks again at the next tick.
func (ws *Workers) admit(ctx context.Context, now time.Time, n int, why string) int {
	granted, cut := ws.Ready.Admit(ctx, now, ws.Cfg, n, ws.Live()+ws.Slots.DrainingSlots(), why)
	if cut {
		ws.Target = min(ws.Target, ws.Live()+granted)
	}
	return granted
}

// Recount tells the ledger what the pool holds after its starts: a start
// that failed gives its claim back.
func (ws *Workers) Recount() {
	ws.Ready.Recount(ws.Cfg, ws.Live()+ws.Slots.DrainingSlots())
}
