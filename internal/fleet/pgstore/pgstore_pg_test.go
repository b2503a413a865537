package pgstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// The tests below need a real PostgreSQL: FLEXIQ_TEST_PG_URL (with the
// password; the role may create a schema). test/e2e's TestFleetPgStore
// runs them inside the sandbox, where Debian's server runs, with
// FLEXIQ_TEST_PG_UNIT naming its unit for the restart test.
func pgURL(t *testing.T) string {
	t.Helper()
	u := pgURLFromEnv()
	if u == "" {
		t.Skip("FLEXIQ_TEST_PG_URL is not set: test/e2e's TestFleetPgStore runs this against a real server")
	}
	return u
}

const testSchema = "flexiq_fleet_test"

func pgURLFromEnv() string { return os.Getenv("FLEXIQ_TEST_PG_URL") }

func configConn(u string) config.Conn { return config.Conn{URL: u} }

// newTestStore is a store on the test server, in the test schema.
func newTestStore(t *testing.T, opts Options) *Store {
	t.Helper()
	opts.Schema = testSchema
	if opts.ApplicationName == "" {
		opts.ApplicationName = "pgstore-test"
	}
	s := New(configConn(pgURL(t)), opts)
	t.Cleanup(func() { s.Close() })
	return s
}

// testPool is a pool name no other test (or earlier run) uses.
func testPool(t *testing.T) string {
	return fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// acquire is Acquire that fails the test on an error.
func acquire(t *testing.T, s *Store, pool, holder string, epoch uint64, ttl time.Duration) (fleet.Lease, bool) {
	t.Helper()
	l, held, err := s.Acquire(ctxT(t), pool, holder, epoch, ttl)
	if err != nil {
		t.Fatalf("Acquire(%s, %s, %d): %v", pool, holder, epoch, err)
	}
	return l, held
}

// waitAcquire tries until holder acquires (at most 5 s), which happens
// once the lease has expired by the server's clock.
func waitAcquire(t *testing.T, s *Store, pool, holder string, ttl time.Duration) fleet.Lease {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if l, held := acquire(t, s, pool, holder, 0, ttl); held {
			return l
		}
	}
	t.Fatalf("%s never acquired %s", holder, pool)
	return fleet.Lease{}
}

// The paused leader (issue 20): A holds the lease with a 300 ms TTL; B
// cannot take it, nor extend it by trying (River #197); once it expires by
// the server's clock B takes it with epoch + 1; A, back, can neither
// renew (its epoch is old) nor write a plan; epochs never decrease.
func TestPgPausedLeader(t *testing.T) {
	const ttl = 300 * time.Millisecond
	a, b := newTestStore(t, Options{}), newTestStore(t, Options{})
	pool := testPool(t)
	la, held := acquire(t, a, pool, "host-a", 0, ttl)
	if !held || la.Holder != "host-a" || la.Epoch != 1 {
		t.Fatalf("A's first acquisition: %+v held %v, want host-a epoch 1", la, held)
	}
	lb, held := acquire(t, b, pool, "host-b", 0, ttl)
	if held || lb.Holder != "host-a" || lb.Epoch != 1 || !lb.Expires.Equal(la.Expires) {
		t.Fatalf("B while A holds: %+v held %v, want A's lease untouched (%v)", lb, held, la.Expires)
	}
	// B trying with A's epoch (a renewal clause that ignored the holder
	// would let it through).
	if lb, held = acquire(t, b, pool, "host-b", 1, ttl); held || !lb.Expires.Equal(la.Expires) {
		t.Fatalf("B with A's epoch: %+v held %v, want refused and A's expiry untouched", lb, held)
	}
	ra, held := acquire(t, a, pool, "host-a", 1, ttl)
	if !held || ra.Epoch != 1 || !ra.Expires.After(la.Expires) {
		t.Fatalf("A's renewal: %+v held %v, want epoch 1 kept and a later expiry than %v", ra, held, la.Expires)
	}
	if err := a.WritePlan(ctxT(t), pool, "host-a", 1, fleet.Plan{Target: 3, Shares: map[string]int{"host-a": 3}}); err != nil {
		t.Fatalf("A's plan while it holds the lease: %v", err)
	}
	// A pauses; B waits for the expiry.
	nb := waitAcquire(t, b, pool, "host-b", ttl)
	if nb.Epoch != 2 || nb.Holder != "host-b" {
		t.Fatalf("B's acquisition: %+v, want host-b epoch 2", nb)
	}
	// B's acquisition started (Expires - ttl, the server's clock) no
	// earlier than A's lease ended.
	if start := nb.Expires.Add(-ttl); start.Before(ra.Expires) {
		t.Fatalf("B acquired at %v, before A's lease expired at %v", start, ra.Expires)
	}
	// A comes back.
	if l, held := acquire(t, a, pool, "host-a", 1, ttl); held || l.Holder != "host-b" || l.Epoch != 2 {
		t.Fatalf("A's renewal after B took over: %+v held %v, want refused, B's lease", l, held)
	}
	err := a.WritePlan(ctxT(t), pool, "host-a", 1, fleet.Plan{Target: 9, Shares: map[string]int{"host-a": 9}})
	if !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("A's plan with its old epoch: %v, want ErrFenced", err)
	}
	// B's own stale epoch is fenced too, its current one lands.
	if err := b.WritePlan(ctxT(t), pool, "host-b", 1, fleet.Plan{Target: 9}); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("B's plan with epoch 1: %v, want ErrFenced", err)
	}
	if err := b.WritePlan(ctxT(t), pool, "host-b", 2, fleet.Plan{Target: 4, Shares: map[string]int{"host-b": 4}}); err != nil {
		t.Fatalf("B's plan: %v", err)
	}
	p, _, err := a.ReadPlan(ctxT(t), pool)
	if err != nil || p.Epoch != 2 || p.Target != 4 || p.Shares["host-b"] != 4 || p.Shares["host-a"] != 0 {
		t.Fatalf("the plan after the fenced write: %+v %v, want B's (epoch 2, target 4)", p, err)
	}
}

// Oban #1488: a host that lost the lease and comes back under the same id
// (a restarted daemon, or the old process of a host whose new one leads)
// cannot renew by its name alone, nor write.
func TestPgSameHolderOldEpoch(t *testing.T) {
	const ttl = 300 * time.Millisecond
	old, restarted := newTestStore(t, Options{}), newTestStore(t, Options{})
	pool := testPool(t)
	l1, held := acquire(t, old, pool, "host-a", 0, ttl)
	if !held || l1.Epoch != 1 {
		t.Fatalf("first acquisition: %+v %v", l1, held)
	}
	// The restarted instance holds no epoch: it waits for the expiry,
	// then takes a new one.
	if l, held := acquire(t, restarted, pool, "host-a", 0, ttl); held || !l.Expires.Equal(l1.Expires) {
		t.Fatalf("same id, no epoch, before the expiry: %+v %v, want refused, lease untouched", l, held)
	}
	l2 := waitAcquire(t, restarted, pool, "host-a", 30*time.Second)
	if l2.Epoch != 2 {
		t.Fatalf("same id after the expiry: epoch %d, want 2", l2.Epoch)
	}
	if l, held := acquire(t, old, pool, "host-a", 1, ttl); held || l.Epoch != 2 || !l.Expires.Equal(l2.Expires) {
		t.Fatalf("the old instance's renewal: %+v %v, want refused and the new lease untouched (%v)", l, held, l2.Expires)
	}
	if err := old.WritePlan(ctxT(t), pool, "host-a", 1, fleet.Plan{Target: 1}); !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("the old instance's plan: %v, want ErrFenced", err)
	}
	if err := old.Release(ctxT(t), pool, "host-a", 1); err != nil {
		t.Fatal(err)
	}
	if l, held := acquire(t, restarted, pool, "host-a", 2, 30*time.Second); !held || l.Epoch != 2 {
		t.Fatalf("the old instance's Release released the new lease: %+v %v", l, held)
	}
}

// A lease that expired with nobody taking it: its holder can no longer
// write (the followers may already hold their last targets), but may renew
// with the same epoch, since no other host held it in between.
func TestPgExpiredHolderCannotWrite(t *testing.T) {
	const ttl = 200 * time.Millisecond
	s := newTestStore(t, Options{})
	pool := testPool(t)
	l, _ := acquire(t, s, pool, "host-a", 0, ttl)
	var err error
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if err = s.WritePlan(ctxT(t), pool, "host-a", l.Epoch, fleet.Plan{Target: 1}); err != nil {
			break
		}
	}
	if !errors.Is(err, fleet.ErrFenced) {
		t.Fatalf("plan after the expiry: %v, want ErrFenced", err)
	}
	if r, held := acquire(t, s, pool, "host-a", l.Epoch, ttl); !held || r.Epoch != l.Epoch {
		t.Fatalf("renewal of an expired lease nobody took: %+v %v, want held, epoch %d", r, held, l.Epoch)
	}
}

// Release lets another host acquire at once, notifies the listeners, and
// keeps the epoch going up; a release with the wrong epoch does nothing.
func TestPgReleaseNotifies(t *testing.T) {
	a, b := newTestStore(t, Options{}), newTestStore(t, Options{})
	pool := testPool(t)
	l, _ := acquire(t, a, pool, "host-a", 0, time.Minute)
	lis, err := b.Listen(ctxT(t), "other", pool)
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close(context.Background())
	if err := a.Release(ctxT(t), pool, "host-a", l.Epoch+1); err != nil {
		t.Fatal(err)
	}
	if l2, held := acquire(t, b, pool, "host-b", 0, time.Minute); held || l2.Holder != "host-a" {
		t.Fatalf("after a release with the wrong epoch: %+v %v, want A still holding", l2, held)
	}
	if err := a.Release(ctxT(t), pool, "host-a", l.Epoch); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if got, err := lis.Wait(wctx); err != nil || got != pool {
		t.Fatalf("listener: %q %v, want %q", got, err, pool)
	}
	l2, held := acquire(t, b, pool, "host-b", 0, time.Minute)
	if !held || l2.Epoch != l.Epoch+1 {
		t.Fatalf("B after the release: %+v %v, want held at once with epoch %d", l2, held, l.Epoch+1)
	}
}

// Hosts racing for a free lease: exactly one wins, all see the same lease.
func TestPgAcquireRace(t *testing.T) {
	const n = 6
	pool := testPool(t)
	type res struct {
		l    fleet.Lease
		held bool
		err  error
	}
	out := make(chan res, n)
	start := make(chan struct{})
	for i := range n {
		s := newTestStore(t, Options{})
		if _, _, err := s.ReadPlan(ctxT(t), "warm-up"); err != nil { // connect first
			t.Fatal(err)
		}
		go func() {
			<-start
			l, held, err := s.Acquire(context.Background(), pool, fmt.Sprintf("host-%d", i), 0, time.Minute)
			out <- res{l, held, err}
		}()
	}
	close(start)
	winners := 0
	for range n {
		r := <-out
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.held {
			winners++
			if r.l.Epoch != 1 {
				t.Errorf("winner's epoch %d, want 1", r.l.Epoch)
			}
		}
	}
	if winners != 1 {
		t.Fatalf("%d hosts hold the lease, want 1", winners)
	}
}

// testConn is a plain connection to the test server, for the tests' own
// statements.
func testConn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(ctxT(t), pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}
