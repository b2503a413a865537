package workers

// The workers' side of a service pool's port guard (replicas.Guard,
// issue 27 item 1): a replica enters discovery only while the listeners
// on its ports are its units' own.

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/replicas"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/portowner"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// guardPorts keeps s's guard in step with cfg's ports: a pool given its
// first port by a reload has its listeners checked from then on, one
// that lost its last has nothing to check.
func (s *service) guardPorts(cfg *config.Pool, clock Clock, dump func() (*portowner.Table, error), log *eventlog.Logger, fields replicas.Fields) {
	switch has := len(cfg.Service.Ports) > 0; {
	case has && s.Guard == nil:
		s.Guard = replicas.NewGuard(clock, dump, log, fields)
	case !has && s.Guard != nil:
		s.Guard.Stop()
		s.Guard = nil
	}
}

// GuardC is the channel of the port checks due, nil without a guard.
func (s *service) GuardC() <-chan time.Time {
	if s == nil {
		return nil
	}
	return s.Guard.C()
}

// checkPorts judges w's listeners against its units (rank 0, and a gang
// group's other ranks for their ports): nil when all are theirs, or none
// listens yet.
func (s *service) checkPorts(w *Worker, notBefore time.Time) *replicas.Verdict {
	ws := s.ws
	g := s.Guard
	if g == nil || (len(w.ports) == 0 && len(w.rankPorts) == 0) {
		return nil
	}
	us := []replicas.Unit{{Name: w.unit, Ports: w.ports, SocketPorts: replicas.SocketPorts(ws.Cfg.Service, w.ports),
		SocketUnit: units.SocketName(ws.name, w.slot), Cgroup: &w.cgroup, SocketCg: &w.socketCgroup}}
	for len(w.rankCgroups) < len(w.rankPorts) {
		w.rankCgroups = append(w.rankCgroups, "")
	}
	for i, rp := range w.rankPorts {
		us = append(us, replicas.Unit{Name: units.RankUnitName(ws.name, w.slot, i+1), Ports: rp, Cgroup: &w.rankCgroups[i]})
	}
	return g.Check(notBefore, us, func(unit string) (string, error) {
		rctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		return ws.units.ControlGroup(rctx, unit)
	})
}

// noteHeld keeps the guard's journal episodes of w.
func (s *service) noteHeld(w *Worker, v *replicas.Verdict) {
	ws := s.ws
	s.Guard.Note(w.slot, v, func(port int) bool { return replicas.IsAutoPort(ws.Cfg.Service, w.ports, port) })
}

// GuardRound checks every replica that says it is ready: one whose port is
// held by another leaves discovery (or never enters), one whose ports are
// its own again enters. It runs every guardPeriod on the loop, and at
// every reconcile. It reports whether a replica's readiness changed.
func (s *service) GuardRound(now time.Time) bool {
	if s == nil || s.Guard == nil {
		return false
	}
	ws := s.ws
	changed := false
	for _, w := range ws.Slots.LiveWorkers() {
		if w.claim != repReady {
			continue
		}
		v := s.checkPorts(w, now)
		s.noteHeld(w, v)
		switch {
		case v != nil && w.rd == repReady:
			w.notReadySince = now
			s.applyReadiness(w, repUnready, v)
			changed = true
		case v == nil && w.rd != repReady:
			s.applyReadiness(w, repReady, nil)
			changed = true
		}
	}
	s.Guard.EndHeld(now, func(slot int) string {
		if w := ws.Slots.Live[slot]; w != nil {
			return w.unit
		}
		return ""
	})
	return changed
}

// heldSlots are those of slots whose fixed port another listens on: they
// get no start (replicas.Guard.HeldSlots).
func (s *service) heldSlots(now time.Time, slots []int) map[int]bool {
	if s == nil {
		return nil
	}
	ws := s.ws
	return s.Guard.HeldSlots(now, ws.Cfg, slots, func(port int) bool {
		// A replica of the pool still stopping holds its own port.
		for _, d := range ws.Slots.Draining {
			for _, p := range d.Ports {
				if p == port {
					return true
				}
			}
		}
		return false
	})
}

// avoidedPorts adds the auto ports found held to taken.
func (s *service) avoidedPorts(taken map[int]bool) {
	if s != nil {
		s.Guard.Avoided(taken)
	}
}
