package controller

// The degraded state (issue 19 §6). A worker above min_workers that fails
// is optional capacity: it is replaced with backoff, as always. The
// baseline is another matter: a pool is degraded when
//
//   - it has fewer live workers than its baseline, min(min_workers, the
//     target: a pin below min_workers lowers it), and
//   - a slot without a live worker has failed degradedFailures times in a
//     row (crashes or failed starts, the crash backoff's count: a worker
//     that stays up slots.BackoffReset starts it over).
//
// It leaves the state once it has held its baseline for degradedClear
// without a break: the workers of a crash loop come up between their
// crashes, and a state that followed them would flap at every one. Every
// pool has it, queue pools too: a queue pool below its min_workers is
// degraded in the same sense. It is the pool's loop's, and is not kept
// across a restart of the daemon, whose crash backoff starts over too.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/slots"
)

const (
	// degradedFailures is how many failures in a row of one slot make a
	// pool short of its baseline degraded: 3 is the backoff's 1 s, 2 s and
	// 4 s, not a one-off crash that the backoff's first restart mends.
	degradedFailures = 3
	// degradedClear is how long the baseline must hold to leave the
	// state: the time after which a slot's backoff starts over.
	degradedClear = slots.BackoffReset
)

// degradedState is what the pool knows of its degraded state.
type degradedState struct {
	on     bool
	since  time.Time // wall clock, for status
	reason string
	// okSince is when the baseline was last reached while degraded; zero
	// while short of it.
	okSince time.Time
}

// check enters or leaves p's degraded state after a tick's reconcile and
// replacements; the owner calls it.
func (dg *degradedState) check(p *Pool, now time.Time) {
	ws := p.workers
	if ws.Stopping || dryRun(p.cfg) {
		return
	}
	baseline := min(p.cfg.MinWorkers, ws.Target)
	live := ws.Live()
	if live >= baseline {
		if !dg.on {
			return
		}
		if dg.okSince.IsZero() {
			dg.okSince = now
		}
		if now.Sub(dg.okSince) >= degradedClear {
			p.log.Event(eventlog.PoolRecovered, eventlog.Notice,
				eventlog.Fields{"FLEXIQ_LIVE": strconv.Itoa(live), "FLEXIQ_MIN": strconv.Itoa(baseline),
					"FLEXIQ_DEGRADED_SEC": strconv.FormatFloat(p.wall().Sub(dg.since).Seconds(), 'f', 0, 64)},
				"no longer degraded: %d live workers, its baseline of %d, for %s", live, baseline, degradedClear)
			*dg = degradedState{}
		}
		return
	}
	dg.okSince = time.Time{}
	if dg.on {
		return
	}
	slots, failures := failingSlots(ws.Slots)
	if len(slots) == 0 {
		return
	}
	names := make([]string, len(slots))
	for i, s := range slots {
		names[i] = strconv.Itoa(s)
	}
	dg.on, dg.since = true, p.wall()
	dg.reason = fmt.Sprintf("%d of %d baseline workers live; slot %s failed %d times in a row", live, baseline, strings.Join(names, ", "), failures)
	p.log.Event(eventlog.PoolDegraded, eventlog.Warning,
		eventlog.Fields{"FLEXIQ_LIVE": strconv.Itoa(live), "FLEXIQ_MIN": strconv.Itoa(baseline),
			"FLEXIQ_SLOTS": strings.Join(names, ","), "FLEXIQ_FAILURES": strconv.Itoa(failures)},
		"degraded: %s; they are restarted with backoff", dg.reason)
}

// failingSlots are the slots without a live worker that have failed at
// least degradedFailures times in a row, sorted, and the most failures of
// any of them.
func failingSlots(f *workers.SlotTable) ([]int, int) {
	var slots []int
	most := 0
	for slot, b := range f.Backoff {
		if _, live := f.Live[slot]; live || b.Failures < degradedFailures {
			continue
		}
		slots = append(slots, slot)
		most = max(most, b.Failures)
	}
	slices.Sort(slots)
	return slots, most
}

// view is the state as status shows it; nil when not degraded.
func (dg *degradedState) view() *api.Degraded {
	if !dg.on {
		return nil
	}
	return &api.Degraded{Since: dg.since, Reason: dg.reason}
}
