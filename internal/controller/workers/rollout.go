package workers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"strconv"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// A rollout replaces the workers whose definition (command line, user,
// environment, limits, ...) is not the pool's current one, as a Deployment
// rollout does: max_surge new workers are started, and only once they are
// active is the same number of old ones drained, so capacity never dips.
// A definition is named by its revision, a hash kept in each unit's
// Description; `flexiq-scaled roll` changes the nonce that goes into it, to
// replace workers after a deploy with no change to the configuration.
type rollout struct {
	Nonce  string // from the last Roll; part of the revision
	Reason string // why the current rollout began, for the journal
	active bool   // a rollout is under way: its end gets a journal entry
	from   int    // how many workers were outdated when it began
}

// Revision names the pool's current worker definition.
func (ws *Workers) Revision() string {
	return specRevision(revisionSpec(ws.Cfg), ws.Roll.Nonce)
}

// specRevision hashes a worker definition (slot aside). Only fields that are
// set go into the hash, so that a later version of the daemon that adds a
// field with a zero default does not change every revision and replace
// every worker on upgrade.
func specRevision(s units.WorkerSpec, nonce string) string {
	s.Slot, s.Revision = 0, ""
	set := map[string]any{}
	v := reflect.ValueOf(s)
	for i := range v.NumField() {
		if f := v.Field(i); !f.IsZero() {
			set[v.Type().Field(i).Name] = f.Interface()
		}
	}
	if nonce != "" {
		set["nonce"] = nonce
	}
	b, _ := json.Marshal(set) // map keys are sorted: a stable encoding
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:6])
}

// maxSurge is how many workers a rollout may start beyond the current count.
func maxSurge(c *config.Pool) int { return max(c.MaxSurge, 1) }

// RolloutStep replaces up to max_surge outdated workers: starts as many new
// ones, and drains an old one as each new one's start goes through.
func (ws *Workers) RolloutStep(ctx context.Context, now time.Time) {
	if ws.Stopping {
		return
	}
	rev := ws.Revision()
	var old []*Worker
	for _, w := range ws.Slots.LiveWorkers() {
		if outdated(w, rev) {
			old = append(old, w)
		}
	}
	if len(old) == 0 {
		if ws.Roll.active {
			ws.Roll.active = false
			ws.log.Event(eventlog.RolloutDone, eventlog.Notice, eventlog.Fields{"FLEXIQ_REVISION": rev},
				"rollout done: all %d workers run revision %s", len(ws.Slots.Live), rev)
		}
		return
	}
	if !ws.Roll.active {
		ws.Roll.active, ws.Roll.from = true, len(old)
		why := ws.Roll.Reason
		if why == "" {
			why = "the worker definition changed"
		}
		ws.log.Event(eventlog.RolloutProgress, eventlog.Notice, eventlog.Fields{
			"FLEXIQ_REVISION": rev, "FLEXIQ_REMAINING": strconv.Itoa(len(old)),
		}, "rollout to revision %s begins (%s): %d workers to replace, %d at a time", rev, why, len(old), maxSurge(ws.Cfg))
	}
	if ws.Svc != nil {
		ws.serviceRolloutStep(ctx, now, old, rev)
		return
	}
	ws.StartWorkers(ctx, now, ws.Ready.Surge(ctx, now, ws.Cfg, min(maxSurge(ws.Cfg), len(old))), "rollout", func(nw *Worker) {
		ws.replaceOutdated(ctx, nw, rev)
	})
}

// replaceOutdated drains the outdated worker that nw, just started,
// replaces: the first victim among those still live.
func (ws *Workers) replaceOutdated(ctx context.Context, nw *Worker, rev string) {
	var old []*Worker
	for _, w := range ws.Slots.LiveWorkers() {
		if outdated(w, rev) {
			old = append(old, w)
		}
	}
	for _, w := range PickVictims(old, 1, rev) {
		if !ws.stopWorker(ctx, w, "rollout: replaced by "+nw.unit) {
			continue
		}
		left := len(old) - 1
		ws.log.Event(eventlog.RolloutProgress, eventlog.Info, eventlog.Fields{
			"FLEXIQ_REVISION": rev, "FLEXIQ_OLD_REVISION": w.revision, "FLEXIQ_REMAINING": strconv.Itoa(left),
			"FLEXIQ_UNIT": w.unit, "FLEXIQ_NEW_UNIT": nw.unit,
		}, "rollout: %s replaced by %s; %d of %d left", w.unit, nw.unit, left, ws.Roll.from)
	}
}

// serviceRolloutStep is a rollout step of a service pool: a new replica
// replaces an old one only once it is ready, so the ready count never
// dips. Old replicas leave as new ones beyond the target become ready;
// the next surge starts once the last one is ready.
func (ws *Workers) serviceRolloutStep(ctx context.Context, now time.Time, old []*Worker, rev string) {
	pending := 0
	for _, w := range ws.Slots.LiveWorkers() {
		if !outdated(w, rev) && w.rd != repReady {
			pending++
		}
	}
	surplus := min(len(old), max(0, len(ws.Slots.Live)-max(ws.Target, ws.Cfg.MinWorkers)-pending))
	for i, w := range PickVictims(old, surplus, rev) {
		if !ws.retire(ctx, now, w, "rollout: replaced by a ready replica of revision "+rev) {
			continue
		}
		ws.log.Event(eventlog.RolloutProgress, eventlog.Info, eventlog.Fields{
			"FLEXIQ_REVISION": rev, "FLEXIQ_OLD_REVISION": w.revision, "FLEXIQ_REMAINING": strconv.Itoa(len(old) - i - 1),
			"FLEXIQ_UNIT": w.unit,
		}, "rollout: %s leaves; %d of %d left", w.unit, len(old)-i-1, ws.Roll.from)
	}
	if pending > 0 || surplus == len(old) {
		return
	}
	ws.StartWorkers(ctx, now, ws.Ready.Surge(ctx, now, ws.Cfg, min(maxSurge(ws.Cfg), len(old)-surplus)), "rollout", nil)
}
