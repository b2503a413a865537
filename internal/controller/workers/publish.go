package workers

// The workers' side of discovery (replicas.Publishing): which replicas
// are ready, and the drain of one that leaves. A ready replica that
// leaves is first taken out of the set; only once a publish without it has
// succeeded and its commands have finished does its drain period begin
// (quiet.go holds it meanwhile, persisted, so that a restart neither
// re-adds nor stops it early).

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// ReadySet is the pool's ready replicas as discovery shows them.
func (s *service) ReadySet() (discovery.Set, string) {
	ws := s.ws
	addr := replicas.Address(ws.Cfg.Service)
	var reps []discovery.Replica
	var key strings.Builder
	for _, w := range ws.Slots.LiveWorkers() {
		if w.rd != repReady {
			continue
		}
		reps = append(reps, discovery.Replica{Slot: w.slot, Unit: w.unit, Address: addr, Ports: w.ports})
		fmt.Fprintf(&key, "%d %s %v;", w.slot, w.unit, w.ports)
		// A gang group's other ranks: in the JSON file and .Replicas
		// with their rank, never in file_sd or .Leaders (rank 0 is the
		// replica).
		for i, rp := range w.rankPorts {
			unit := units.RankUnitName(ws.name, w.slot, i+1)
			reps = append(reps, discovery.Replica{Slot: w.slot, Unit: unit, Address: addr, Ports: rp, Rank: i + 1})
			fmt.Fprintf(&key, "%d %s %v;", w.slot, unit, rp)
		}
	}
	return discovery.NewSet(ws.name, reps), addr + "|" + key.String()
}

// PublishReady publishes the ready set if it changed (and starts the
// after-change commands of what it rewrote), and begins the drain periods
// it allows.
func (s *service) PublishReady(ctx context.Context, now time.Time) {
	if s == nil || dryRun(s.ws.Cfg) {
		return
	}
	s.armNotify()
	set, key := s.ReadySet()
	if s.Pubs.Publish(now, set, key) {
		s.releaseDrains(ctx, now)
	}
}

// CommandsFinished takes the end of a batch of commands, on the loop: the
// replicas waiting for them begin their drain periods, and a publish that
// came due meanwhile is made.
func (s *service) CommandsFinished(ctx context.Context, now time.Time, d replicas.CommandsDone) {
	s.Pubs.Finished(d)
	s.releaseDrains(ctx, now)
	if s.Pubs.Dirty {
		s.PublishReady(ctx, now)
	}
}

// PumpService takes the service's messages that are waiting, without
// blocking: for the owner when no loop runs (Tick, Drain).
func (s *service) PumpService(ctx context.Context, now time.Time) {
	if s == nil {
		return
	}
	for {
		select {
		case t, ok := <-s.Transitions():
			if !ok {
				return
			}
			s.OnTransition(t)
		case d := <-s.Pubs.Done():
			s.CommandsFinished(ctx, now, d)
		case <-s.relist:
			s.CheckNotify(ctx)
		default:
			return
		}
	}
}

// retireReplica takes a live replica out of service. One that was never
// ready was in no discovery file: it is stopped at once. One that was
// leaves discovery first (if it is still there), and is held draining, as
// a quiet worker is, until the publish without it and its commands are
// done, and then its drain period: a proxy may still send it a request it
// took before its reload.
func (s *service) retireReplica(ctx context.Context, now time.Time, w *Worker, why string) bool {
	ws := s.ws
	if dryRun(ws.Cfg) {
		return false
	}
	if !w.everReady {
		return ws.stopWorker(ctx, w, why)
	}
	s.untrack(w)
	ws.Slots.Stop(w, w.ports)
	svc := ws.Cfg.Service
	// Until its commands are done the deadline is an upper bound, what a
	// restart of the daemon meanwhile goes by.
	q := &quietUnit{slot: w.slot, invocation: w.invocation, deadline: now.Add(svc.DrainPeriod + replicas.CommandBound(svc)),
		awaitGen: s.Pubs.PubGen() + 1}
	ws.addQuiet(now, w.unit, q)
	ws.QuietFile.save(ws.Quiet, ws.log)
	ws.report.draining(w.slot, w.unit, fmt.Sprintf("%s: leaves discovery, then serves out a drain period of %s", why, svc.DrainPeriod))
	return true
}

// releaseDrains begins the drain period of every leaving replica whose
// publish and commands are done.
func (s *service) releaseDrains(ctx context.Context, now time.Time) {
	ws := s.ws
	released := false
	for _, unit := range sortedKeys(ws.Quiet) {
		q := ws.Quiet[unit]
		if q.awaitGen == 0 || q.awaitGen > s.Pubs.DoneGen() {
			continue
		}
		q.awaitGen = 0
		q.timer.Stop()
		q.deadline = now.Add(ws.Cfg.Service.DrainPeriod)
		ws.addQuiet(now, unit, q)
		released = true
		ws.log.Event(eventlog.WorkerDraining, eventlog.Info, ws.workerFields(q.slot, unit, nil),
			"%s is out of discovery: its drain period of %s begins", unit, ws.Cfg.Service.DrainPeriod)
		if sig := ws.Cfg.QuietSignalNumber; sig != 0 {
			s.drainSignal(ctx, q.slot, unit, sig)
		}
	}
	if released {
		ws.QuietFile.save(ws.Quiet, ws.log)
		ws.QuietStep(ctx, now)
	}
}

// drainSignal sends a leaving replica's quiet_signal as its drain period
// begins, off the loop (acting.go); a failure is only logged.
func (s *service) drainSignal(ctx context.Context, slot int, unit string, sig int) {
	ws := s.ws
	name := ws.Cfg.QuietSignal
	ws.callJob(ctx, acting.Other, killMain(unit, sig), func(err error) {
		if err != nil {
			ws.log.Event(eventlog.WorkerDraining, eventlog.Warning, ws.workerFields(slot, unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
				"cannot send %s to %s: %v", name, unit, err)
		}
	})
}

// SvcDone is the channel of the after-change commands' ends, nil for a
// queue pool.
func (s *service) SvcDone() <-chan replicas.CommandsDone {
	if s == nil {
		return nil
	}
	return s.Pubs.Done()
}
