package pgstore

import (
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Writes anyone who can write the fleet's tables can make (issue 27, item
// 3): none may stop the store from giving a lease or taking a plan.
func TestPgHostileWrites(t *testing.T) {
	s := newTestStore(t, Options{})
	pool := testPool(t)
	ctx := ctxT(t)
	admin, err := pgx.Connect(ctx, pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	n := newNames(testSchema)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := admin.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	l, held := acquire(t, s, pool, "host-a", 0, time.Minute)
	if !held {
		t.Fatal("first acquisition refused")
	}
	// A huge epoch on a live lease: taken over at once, above what the
	// caller knows.
	exec("UPDATE "+n.lease+" SET holder = 'evil', epoch = 9223372036854775807, expires_at = now() + interval '1 minute' WHERE pool = $1", pool)
	if l, held, err := s.Acquire(ctx, pool, "host-a", 7, time.Minute); err != nil || !held || l.Epoch != 8 {
		t.Fatalf("acquire over a lease of epoch 2^63-1: %+v held=%v %v, want host-a at epoch 8", l, held, err)
	}
	// A lease that outlives ten ttls and a minute: taken over.
	exec("UPDATE "+n.lease+" SET holder = 'evil', epoch = 9, expires_at = now() + interval '1 day' WHERE pool = $1", pool)
	l, held, err = s.Acquire(ctx, pool, "host-a", 8, time.Minute)
	if err != nil || !held || l.Epoch != 10 {
		t.Fatalf("acquire over a lease of a day: %+v held=%v %v, want epoch 10", l, held, err)
	}
	// A plan above the lease's epoch: unusable, and the leader's plan
	// replaces it.
	exec("INSERT INTO "+n.plan+" (pool, epoch, target, shares, written_at) VALUES ($1, 1000, 0, '{}', now())"+
		" ON CONFLICT (pool) DO UPDATE SET epoch = 1000, target = 0, shares = '{}'", pool)
	if _, now, err := s.ReadPlan(ctx, pool); !errors.Is(err, fleet.ErrBadPlan) || now.IsZero() {
		t.Errorf("a plan above the lease: %v (now %s), want ErrBadPlan with the server's clock", err, now)
	}
	if err := s.WritePlan(ctx, pool, "host-a", l.Epoch, fleet.Plan{Target: 2}); err != nil {
		t.Fatalf("the leader's plan over it: %v, want written", err)
	}
	if p, _, err := s.ReadPlan(ctx, pool); err != nil || p.Epoch != l.Epoch || p.Target != 2 {
		t.Errorf("plan after: %+v %v, want the leader's", p, err)
	}
	// The lease row lost (deleted): the next term is above what the caller
	// knew and the plan's epoch, not 1.
	exec("DELETE FROM "+n.lease+" WHERE pool = $1", pool)
	if l, held, err := s.Acquire(ctx, pool, "host-b", 0, time.Minute); err != nil || !held || l.Epoch != 11 {
		t.Errorf("after the lease row's loss: %+v held=%v %v, want epoch 11 (above the plan's 10)", l, held, err)
	}
}
