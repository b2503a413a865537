package workers

// Type=notify replicas (readiness = "notify") are ready once systemd says
// they are active, which only a listing tells. Rather than wait for the
// next tick (a poll interval may be many seconds, the discovery latency
// issue 19 asks for is a probe period), the loop re-lists the pool every
// notifyPoll while a replica is activating, and only reads readiness from
// that listing: crashes and stops stay the tick's to handle.

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/acting"
)

const notifyPoll = time.Second

// notifyPending says whether a notify replica is waiting for READY=1.
func (s *service) notifyPending() bool {
	if s == nil || s.ws.Cfg.Service.Readiness.Kind != config.ReadyNotify {
		return false
	}
	ws := s.ws
	for _, w := range ws.Slots.Live {
		if w.rd != repReady {
			return true
		}
	}
	return false
}

// armNotify asks for a re-list in notifyPoll while a notify replica is
// activating; one is asked at a time.
func (s *service) armNotify() {
	if !s.notifyPending() || s.relistArmed {
		return
	}
	s.relistArmed = true
	ch := s.relist
	time.AfterFunc(notifyPoll, func() {
		select {
		case ch <- struct{}{}:
		default:
		}
	})
}

// RelistC is the channel of the re-lists due, nil without a service.
func (s *service) RelistC() <-chan struct{} {
	if s == nil {
		return nil
	}
	return s.relist
}

// CheckNotify re-lists the pool off the loop and takes in the replicas
// that became active, back on it.
func (s *service) CheckNotify(ctx context.Context) {
	ws := s.ws
	s.relistArmed = false
	if !s.notifyPending() {
		return
	}
	pl := ws.ListPlan()
	var l Listing
	ws.jobs.Submit(ctx, &acting.Job{Kind: acting.Other, Call: func(ctx context.Context) { l = pl.List(ctx) }, Done: func(bool) {
		if l.Err == nil {
			byUnit := indexByUnit(l.Workers)
			for _, w := range ws.Slots.LiveWorkers() {
				if lw, ok := byUnit.Get(w.unit); ok && (w.invocation == "" || w.invocation == lw.InvocationID) && lw.ActiveState == "active" {
					s.setReadiness(w, repReady, nil, time.Time{})
				}
			}
		}
		s.armNotify()
	}})
}
