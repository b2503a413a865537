package pgstore

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Members carry what was heartbeaten, one row per host, SeenAt and now on
// the server's clock; silent members age, long-silent ones are forgotten.
func TestPgMembersAge(t *testing.T) {
	s := newTestStore(t, Options{ForgetAfter: 700 * time.Millisecond})
	ctx, pool := ctxT(t), testPool(t)
	ms, now0, err := s.Members(ctx, pool)
	if err != nil || len(ms) != 0 || now0.IsZero() {
		t.Fatalf("no members yet: %v %v %v, want none and the server's now", ms, now0, err)
	}
	h1 := fleet.Member{ID: "h1", Capacity: 8, Live: 3, Starting: 1, Draining: 2, Version: "1.2.3"}
	if err := s.Heartbeat(ctx, pool, h1); err != nil {
		t.Fatal(err)
	}
	time.Sleep(400 * time.Millisecond)
	h2 := fleet.Member{ID: "h2", Capacity: 4, Version: "1.2.4"}
	for _, m := range []fleet.Member{h2, {ID: "h2", Capacity: 5, Live: 1, Version: "1.2.4"}} { // the second replaces the first
		if err := s.Heartbeat(ctx, pool, m); err != nil {
			t.Fatal(err)
		}
	}
	ms, now, err := s.Members(ctx, pool)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members: %+v %v, want h1 and h2", ms, err)
	}
	got1, got2 := ms[0], ms[1]
	if got1.ID != "h1" || got1.Capacity != 8 || got1.Live != 3 || got1.Starting != 1 || got1.Draining != 2 || got1.Version != "1.2.3" {
		t.Errorf("h1: %+v, want %+v", got1, h1)
	}
	if got2.ID != "h2" || got2.Capacity != 5 || got2.Live != 1 {
		t.Errorf("h2: %+v, want the second heartbeat's capacity 5, live 1", got2)
	}
	// Ages by the server's clock: h1 is the older by about the sleep.
	age1, age2 := now.Sub(got1.SeenAt), now.Sub(got2.SeenAt)
	if age2 < 0 || age1 < age2+300*time.Millisecond || !now.After(now0) {
		t.Errorf("ages h1 %v, h2 %v (now %v): want h2 >= 0 and h1 older by about 400ms", age1, age2, now)
	}
	// h1 silent past ForgetAfter: h2's next heartbeat forgets it.
	time.Sleep(500 * time.Millisecond)
	if err := s.Heartbeat(ctx, pool, h2); err != nil {
		t.Fatal(err)
	}
	if ms, _, err = s.Members(ctx, pool); err != nil || len(ms) != 1 || ms[0].ID != "h2" {
		t.Errorf("after h1 was silent for ForgetAfter: %+v %v, want h2 alone", ms, err)
	}
}

// A plan comes back as written, its At on the server's clock; no plan is
// Epoch 0.
func TestPgPlanRoundTrip(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx, pool := ctxT(t), testPool(t)
	p, now, err := s.ReadPlan(ctx, pool)
	if err != nil || p.Epoch != 0 || now.IsZero() {
		t.Fatalf("no plan yet: %+v %v %v", p, now, err)
	}
	l, _ := acquire(t, s, pool, "h1", 0, time.Minute)
	want := fleet.Plan{Target: 7, Shares: map[string]int{"h1": 4, "h2": 3}, State: []byte{0, 1, '\\', 'x', 0xff}}
	if err := s.WritePlan(ctx, pool, "h1", l.Epoch, want); err != nil {
		t.Fatal(err)
	}
	got, now, err := s.ReadPlan(ctx, pool)
	if err != nil || got.Epoch != l.Epoch || got.Target != 7 || len(got.Shares) != 2 || got.Shares["h1"] != 4 ||
		got.Shares["h2"] != 3 || !bytes.Equal(got.State, want.State) || got.At.IsZero() || got.At.After(now) {
		t.Fatalf("plan read back: %+v (now %v) %v, want %+v at epoch %d", got, now, err, want, l.Epoch)
	}
}

// Every method is one statement, so one round trip (pings are off), and a
// tick's statements per host are what the package's doc says.
func TestPgOneRoundTrip(t *testing.T) {
	s := newTestStore(t, Options{})
	ctx, pool := ctxT(t), testPool(t)
	if _, _, err := s.ReadPlan(ctx, pool); err != nil { // the schema check, the connection
		t.Fatal(err)
	}
	var epoch uint64
	calls := []struct {
		name string
		f    func() error
	}{
		{"Acquire", func() error { l, _, err := s.Acquire(ctx, pool, "h1", 0, time.Minute); epoch = l.Epoch; return err }},
		{"Acquire (renewal)", func() error { _, _, err := s.Acquire(ctx, pool, "h1", epoch, time.Minute); return err }},
		{"Acquire (refused)", func() error { _, _, err := s.Acquire(ctx, pool, "h2", 0, time.Minute); return err }},
		{"Heartbeat", func() error { return s.Heartbeat(ctx, pool, fleet.Member{ID: "h1", Capacity: 2}) }},
		{"Members", func() error { _, _, err := s.Members(ctx, pool); return err }},
		{"WritePlan", func() error { return s.WritePlan(ctx, pool, "h1", epoch, fleet.Plan{Target: 2}) }},
		{"WritePlan (fenced)", func() error { s.WritePlan(ctx, pool, "h2", epoch, fleet.Plan{}); return nil }},
		{"ReadPlan", func() error { _, _, err := s.ReadPlan(ctx, pool); return err }},
		{"Release", func() error { return s.Release(ctx, pool, "h1", epoch) }},
	}
	for _, c := range calls {
		before := s.Stats()
		if err := c.f(); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		after := s.Stats()
		if n := after.Statements - before.Statements; n != 1 || after.Connects != before.Connects {
			t.Errorf("%s: %d statements and %d connects, want 1 and 0", c.name, n, after.Connects-before.Connects)
		}
	}
	// The figures (issue 20's "store traffic per host per tick"): a
	// follower heartbeats and reads the plan; the leader heartbeats, lists
	// the members and writes the plan; everyone calls Acquire once per
	// renewal period (about 5 s: the leader renews, followers try).
	t.Logf("FIGURE pgstore statements per tick: follower 2 (Heartbeat, ReadPlan), leader 3 (Heartbeat, Members, WritePlan); plus 1 Acquire per host per renewal; each statement one round trip")
}

// Nothing depends on a session: with every connection recycled after
// 100 ms, the lease is renewed and the plan written through new ones; a
// connection killed under the store (pg_terminate_backend, as a pooler or
// an operator would) costs at most one failed call.
func TestPgRecycledConnections(t *testing.T) {
	s := newTestStore(t, Options{MaxConnLifetime: 100 * time.Millisecond, ApplicationName: "pgstore-recycled"})
	ctx, pool := ctxT(t), testPool(t)
	l, held := acquire(t, s, pool, "h1", 0, time.Minute)
	if !held {
		t.Fatal("not acquired")
	}
	connects := s.Stats().Connects
	for i := range 3 {
		time.Sleep(250 * time.Millisecond)
		if r, held := acquire(t, s, pool, "h1", l.Epoch, time.Minute); !held || r.Epoch != l.Epoch {
			t.Fatalf("renewal %d on a recycled connection: %+v %v", i, r, held)
		}
		if err := s.WritePlan(ctx, pool, "h1", l.Epoch, fleet.Plan{Target: i}); err != nil {
			t.Fatalf("plan %d on a recycled connection: %v", i, err)
		}
	}
	if s.Stats().Connects < connects+3 {
		t.Fatalf("connects %d -> %d: the connections were not recycled, the test shows nothing", connects, s.Stats().Connects)
	}
	// Kill the store's backends.
	killer := testConn(t)
	var killed int
	if err := killer.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'pgstore-recycled'").Scan(&killed); err != nil {
		t.Fatal(err)
	}
	fails := 0
	for range 2 {
		if _, held, err := s.Acquire(ctx, pool, "h1", l.Epoch, time.Minute); err != nil {
			fails++
		} else if !held {
			t.Fatal("renewal after the kill refused")
		}
	}
	if fails > 1 {
		t.Fatalf("%d of 2 calls failed after %d backends were killed, want at most 1", fails, killed)
	}
	t.Logf("%d backend(s) killed, %d call(s) failed", killed, fails)
}

// A database restart: calls fail (never ErrFenced, never hanging past
// their deadline) while it is down, then work again with the lease, its
// epoch and the plan as they were: the tables are logged.
func TestPgServerRestart(t *testing.T) {
	unit := os.Getenv("FLEXIQ_TEST_PG_UNIT")
	if unit == "" {
		t.Skip("FLEXIQ_TEST_PG_UNIT is not set: test/e2e's TestFleetPgStore sets it inside the sandbox")
	}
	s := newTestStore(t, Options{Timeout: 2 * time.Second})
	pool := testPool(t)
	l, _ := acquire(t, s, pool, "h1", 0, 5*time.Minute)
	if err := s.WritePlan(ctxT(t), pool, "h1", l.Epoch, fleet.Plan{Target: 5}); err != nil {
		t.Fatal(err)
	}
	systemctl(t, "stop", unit)
	restarted := false
	defer func() {
		if !restarted {
			systemctl(t, "start", unit)
		}
	}()
	t0 := time.Now()
	_, _, errA := s.Acquire(context.Background(), pool, "h1", l.Epoch, 5*time.Minute)
	errH := s.Heartbeat(context.Background(), pool, fleet.Member{ID: "h1"})
	_, _, errP := s.ReadPlan(context.Background(), pool)
	if errA == nil || errH == nil || errP == nil {
		t.Fatalf("with the server stopped: %v / %v / %v, want errors", errA, errH, errP)
	}
	t.Logf("with the server down, 3 calls failed in %v: %v", time.Since(t0).Round(time.Millisecond), errA)
	systemctl(t, "start", unit)
	restarted = true
	var err error
	var r fleet.Lease
	var held bool
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if r, held, err = s.Acquire(context.Background(), pool, "h1", l.Epoch, 5*time.Minute); err == nil {
			break
		}
	}
	if err != nil || !held || r.Epoch != l.Epoch {
		t.Fatalf("after the restart: %+v %v %v, want the lease renewed with epoch %d", r, held, err, l.Epoch)
	}
	if p, _, err := s.ReadPlan(ctxT(t), pool); err != nil || p.Epoch != l.Epoch || p.Target != 5 {
		t.Fatalf("the plan after the restart: %+v %v", p, err)
	}
}

func systemctl(t *testing.T, verb, unit string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "systemctl", verb, unit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl %s %s: %v\n%s", verb, unit, err, out)
	}
}

// A call whose context ends is cancelled on the server too (a cancel
// request, since the store sets no statement_timeout): a statement waiting
// for a row lock does not wait on after its caller gave up, and the
// connection is kept for the next call.
func TestPgStatementCancelled(t *testing.T) {
	s := newTestStore(t, Options{ApplicationName: "pgstore-cancel"})
	pool := testPool(t)
	acquire(t, s, pool, "h1", 0, time.Minute)
	locker := testConn(t)
	tx, err := locker.Begin(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctxT(t), "SELECT FROM "+newNames(testSchema).lease+" WHERE pool = $1 FOR UPDATE", pool); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	if _, _, err := s.Acquire(ctx, pool, "h2", 0, time.Minute); err == nil {
		t.Fatal("Acquire behind a row lock: no error")
	}
	if d := time.Since(t0); d > 3*time.Second {
		t.Errorf("Acquire behind a row lock returned after %v, want about its 300ms deadline", d)
	}
	watcher := testConn(t)
	var waiting int
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		if err := watcher.QueryRow(ctxT(t), "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pgstore-cancel' AND state = 'active'").Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting == 0 {
			break
		}
	}
	if waiting != 0 {
		t.Fatalf("%d statement(s) of the store still running on the server after their caller gave up", waiting)
	}
	tx.Rollback(ctxT(t))
	before := s.Stats().Connects
	if _, _, err := s.ReadPlan(ctxT(t), pool); err != nil {
		t.Fatal(err)
	}
	if after := s.Stats().Connects; after != before {
		t.Errorf("the call after a cancelled one connected again (%d -> %d): the cancelled statement's connection was dropped", before, after)
	}
}

// Hosts starting together on an empty database: each creates the tables
// (CREATE ... IF NOT EXISTS races on the catalog); all of them work.
func TestPgSchemaRace(t *testing.T) {
	const n = 6
	schema := fmt.Sprintf("flexiq_fleet_race_%d", time.Now().UnixNano())
	admin := testConn(t)
	t.Cleanup(func() {
		admin.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	})
	errs := make(chan error, n)
	start := make(chan struct{})
	for i := range n {
		s := New(configConn(pgURL(t)), Options{Schema: schema})
		t.Cleanup(func() { s.Close() })
		go func() {
			<-start
			errs <- s.Heartbeat(context.Background(), "web", fleet.Member{ID: fmt.Sprintf("h%d", i), Capacity: 1})
		}()
	}
	close(start)
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("a host starting with the others: %v", err)
		}
	}
	var members int
	if err := admin.QueryRow(ctxT(t), "SELECT count(*) FROM "+pgx.Identifier{schema, memberTable}.Sanitize()).Scan(&members); err != nil || members != n {
		t.Fatalf("members after the race: %d %v, want %d", members, err, n)
	}
}
