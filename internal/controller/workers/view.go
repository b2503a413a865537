package workers

import (
	"maps"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// Views are the pool's workers as status shows them: the live ones,
// then the draining ones.
func Views(ws *Workers, now time.Time, cpuPerWorker float64) []api.WorkerView {
	out := make([]api.WorkerView, 0, ws.Live()+ws.Draining())
	for _, w := range ws.Slots.LiveWorkers() {
		wv := api.WorkerView{Slot: w.slot, Unit: w.unit, State: "active", Restarts: ws.restarts[w.slot]}
		if !w.since.IsZero() && now.After(w.since) {
			up := now.Sub(w.since).Seconds()
			wv.UptimeSec = &up
		}
		if ws.Svc != nil {
			wv.Readiness, wv.Ports = w.rd.String(), maps.Clone(w.ports)
		}
		if w.utilKnown {
			pct := w.util * cpuPerWorker * 100
			wv.CPUPercent = &pct
		}
		out = append(out, wv)
	}
	for _, unit := range sortedKeys(ws.Slots.Draining) {
		d := ws.Slots.Draining[unit]
		out = append(out, api.WorkerView{Slot: d.Slot, Unit: unit, State: "draining", Restarts: ws.restarts[d.Slot]})
	}
	return out
}
