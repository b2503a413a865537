package coord_test

import (
	"context"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// The wiring the daemon is to do for a pool in a fleet: one coordinator
// per pool, its loop in a goroutine of its own, the pool reading the
// published target; on systemctl stop, Resign after the loop returned.
func Example() {
	var store fleet.Store // redisstore.New or pgstore.New, shared by the pools
	if store == nil {
		return
	}
	c, err := coord.New(coord.Config{Pool: "web", ID: "machine-id", MinWorkers: 2, Initial: -1}, coord.Deps{
		Store: store,
		Self:  func() fleet.Member { return fleet.Member{Capacity: 8, Live: 3, Version: "1.2.3"} },
		Source: func(ctx context.Context, storeNow time.Time, t fleet.Totals) (coord.Input, error) {
			return coord.Input{}, nil
		},
		Pipeline: &policy.Pipeline{Strategy: policy.StrategyHPA, Rec: &policy.Recommender{}, Limiter: &policy.Limiter{}},
		Events:   coord.EventsFunc(func(e coord.Event) { /* eventlog: a MESSAGE_ID per e.Kind */ }),
	})
	if err != nil {
		return
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	// The pool's loop: one more case in its select.
	<-c.Changed()
	_ = c.Snapshot().Target // applied with today's machinery
	// A released notification (redisstore Released, pgstore Listen)
	// calls c.Wake().
	stop()
	<-done
	_ = c.Resign(context.Background()) // handover: another host leads at once
}
