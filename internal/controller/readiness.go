package controller

// What stands between a wanted start and the start itself is the pool's
// admit.Gate (required units, start condition, the host's budget); these
// are the workers' few words with it.

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/admit"
)

// newGate is the admission of ws's pool.
func newGate(ws *workers) *admit.Gate {
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
func (ws *workers) admit(ctx context.Context, now time.Time, n int, why string) int {
	granted, cut := ws.ready.Admit(ctx, now, ws.cfg, n, ws.live()+ws.slots.DrainingSlots(), why)
	if cut {
		ws.target = min(ws.target, ws.live()+granted)
	}
	return granted
}

// recount tells the ledger what the pool holds after its starts: a start
// that failed gives its claim back.
func (ws *workers) recount() {
	ws.ready.Recount(ws.cfg, ws.live()+ws.slots.DrainingSlots())
}

// readyState is what holds the starts back, as the explanation shows it.
type readyState struct {
	deferring  bool
	waitingFor string
	skipping   bool
	skips      int
	exhausted  bool
}

func readyStateOf(g *admit.Gate) readyState {
	h := g.Held()
	return readyState{deferring: h.Deferring, waitingFor: h.WaitingFor, skipping: h.Skipping, skips: h.Skips, exhausted: h.Exhausted}
}
