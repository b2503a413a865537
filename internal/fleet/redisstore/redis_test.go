package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/redis/go-redis/v9"
)

// The tests against a real redis-server run where FLEXIQ_TEST_REDIS_URL is
// set: test/e2e's TestFleetRedisStore runs this package's test binary
// inside its sandbox, against Debian's redis-server there.

const ttl = 300 * time.Millisecond

// server is a store on the test server, a raw client to look behind it,
// and a pool of the test's own, whose keys are deleted first.
func server(t *testing.T, pool string) (*Store, *redis.Client) {
	t.Helper()
	url := os.Getenv("FLEXIQ_TEST_REDIS_URL")
	if url == "" {
		t.Skip("needs FLEXIQ_TEST_REDIS_URL: test/e2e's TestFleetRedisStore runs this against redis-server in its sandbox")
	}
	opts, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	raw := redis.NewClient(opts)
	t.Cleanup(func() { raw.Close() })
	dropPool(t, raw, pool)
	s := New(config.Conn{URL: url}, Options{})
	t.Cleanup(func() { s.Close() })
	return s, raw
}

// dropPool deletes a pool's keys, as a Redis that lost its data would.
func dropPool(t *testing.T, raw *redis.Client, pool string, only ...string) {
	t.Helper()
	k, _ := poolKeys(pool)
	del := []string{k.lease, k.epoch, k.plan, k.members, k.seen}
	if len(only) > 0 {
		del = only
	}
	if err := raw.Del(context.Background(), del...).Err(); err != nil {
		t.Fatal(err)
	}
}

// acquire is Acquire that must not fail.
func acquire(t *testing.T, s *Store, pool, holder string, epoch uint64, ttl time.Duration) (fleet.Lease, bool) {
	t.Helper()
	l, held, err := s.Acquire(context.Background(), pool, holder, epoch, ttl)
	if err != nil {
		t.Fatalf("%s acquires at epoch %d: %v", holder, epoch, err)
	}
	return l, held
}

// waitAcquire polls Acquire for holder until it holds the lease: after
// the other holder's ttl, on the server's clock.
func waitAcquire(t *testing.T, s *Store, pool, holder string, epoch uint64, within time.Duration) fleet.Lease {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l, held := acquire(t, s, pool, holder, epoch, ttl)
		if held {
			return l
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never acquired within %s: lease %+v", holder, within, l)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Acquire, renew (holder AND epoch, River #197 and Oban #1488), and the
// server's expiry.
func TestRedisLease(t *testing.T) {
	const pool = "t_lease"
	s, _ := server(t, pool)
	a, held := acquire(t, s, pool, "host-a", 0, ttl)
	if !held || a.Holder != "host-a" || a.Epoch != 1 || a.Expires.IsZero() {
		t.Fatalf("first acquisition: %+v held=%v, want host-a at epoch 1", a, held)
	}
	// Only the holder with its epoch renews; everyone else sees the lease.
	tests := []struct {
		holder string
		epoch  uint64
		held   bool
	}{
		{"host-a", a.Epoch, true},
		{"host-a", a.Epoch + 1, false},
		{"host-a", 0, false},
		{"host-b", a.Epoch, false},
		{"host-b", 0, false},
		{"host", a.Epoch, false},
		{"host-a:1", a.Epoch, false},
	}
	last := a // host-a's last renewal
	for _, tc := range tests {
		l, held := acquire(t, s, pool, tc.holder, tc.epoch, ttl)
		if held {
			last = l
		}
		if held != tc.held || l.Holder != "host-a" || l.Epoch != a.Epoch {
			t.Errorf("%s at epoch %d: %+v held=%v, want host-a's lease at epoch %d, held=%v", tc.holder, tc.epoch, l, held, a.Epoch, tc.held)
		}
		// A renewal reports TIME + ttl, another host TIME + PTTL: two
		// readings of the server's clock, each cut to the millisecond, so
		// the same expiry may read a millisecond apart. A call that moved
		// it back would be more.
		if l.Expires.Before(a.Expires.Add(-time.Millisecond)) {
			t.Errorf("%s at epoch %d: expiry went back from %s to %s", tc.holder, tc.epoch, a.Expires, l.Expires)
		}
	}
	// Once host-a stops renewing, the server expires the lease and host-b
	// takes it with the next epoch.
	b := waitAcquire(t, s, pool, "host-b", 0, 10*ttl)
	if b.Epoch != a.Epoch+1 {
		t.Errorf("host-b took the expired lease at epoch %d, want %d", b.Epoch, a.Epoch+1)
	}
	// On the server's clock, host-b's acquisition (its expiry less the
	// ttl) came after host-a's lease expired (to the millisecond, as above).
	if took := b.Expires.Add(-ttl); took.Before(last.Expires.Add(-time.Millisecond)) {
		t.Errorf("host-b acquired at %s, before host-a's lease expired at %s", took, last.Expires)
	}
}

// A leader paused past its ttl (SIGSTOP) comes back to a lease another
// host took: it can neither renew nor write a plan, and epochs never go
// back.
func TestRedisPausedLeader(t *testing.T) {
	const pool = "t_paused"
	s, _ := server(t, pool)
	ctx := context.Background()
	a, _ := acquire(t, s, pool, "host-a", 0, ttl)
	if err := s.WritePlan(ctx, pool, "host-a", a.Epoch, fleet.Plan{Target: 3}); err != nil {
		t.Fatalf("the leader's plan: %v", err)
	}
	b := waitAcquire(t, s, pool, "host-b", a.Epoch, 10*ttl) // host-a is paused
	if b.Epoch <= a.Epoch {
		t.Fatalf("host-b's epoch %d, after host-a's %d", b.Epoch, a.Epoch)
	}
	// host-a resumes, with its old epoch; then tries host-b's.
	for _, e := range []uint64{a.Epoch, b.Epoch} {
		l, held := acquire(t, s, pool, "host-a", e, ttl)
		if held || l.Holder != "host-b" || l.Epoch != b.Epoch {
			t.Errorf("resumed host-a renewing at epoch %d: %+v held=%v, want host-b's lease", e, l, held)
		}
		err := s.WritePlan(ctx, pool, "host-a", e, fleet.Plan{Target: 100})
		if !errors.Is(err, fleet.ErrFenced) || !IsFenced(err) {
			t.Errorf("resumed host-a's plan at epoch %d: %v, want ErrFenced", e, err)
		}
	}
	if err := s.WritePlan(ctx, pool, "host-b", b.Epoch, fleet.Plan{Target: 4}); err != nil {
		t.Fatalf("the new leader's plan: %v", err)
	}
	p, _, err := s.ReadPlan(ctx, pool)
	if err != nil || p.Epoch != b.Epoch || p.Target != 4 {
		t.Errorf("plan = %+v, %v; want host-b's, target 4 at epoch %d", p, err, b.Epoch)
	}
	// host-b loses it in turn (no renewal): host-a's new term is later still.
	a2 := waitAcquire(t, s, pool, "host-a", a.Epoch, 10*ttl)
	if a2.Epoch <= b.Epoch {
		t.Errorf("host-a's new epoch %d, after host-b's %d", a2.Epoch, b.Epoch)
	}
	if err := s.WritePlan(ctx, pool, "host-b", b.Epoch, fleet.Plan{Target: 1}); !errors.Is(err, fleet.ErrFenced) {
		t.Errorf("host-b's plan after losing the lease: %v, want ErrFenced", err)
	}
}

// A release (a clean stop) is announced, and another host acquires at
// once; a release by someone else or with another epoch changes nothing.
func TestRedisRelease(t *testing.T) {
	const pool = "t_release"
	s, _ := server(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	const long = time.Minute // so that only a release can free it
	a, _ := acquire(t, s, pool, "host-a", 0, long)
	released, stop, err := s.Released(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	for _, r := range []struct {
		holder string
		epoch  uint64
	}{{"host-b", a.Epoch}, {"host-a", a.Epoch + 1}, {"host-a", 0}} {
		if err := s.Release(ctx, pool, r.holder, r.epoch); err != nil {
			t.Fatal(err)
		}
		if l, held := acquire(t, s, pool, "host-b", 0, long); held || l.Holder != "host-a" {
			t.Fatalf("after a release by %s at epoch %d, host-b acquired: %+v", r.holder, r.epoch, l)
		}
	}
	began := time.Now()
	if err := s.Release(ctx, pool, "host-a", a.Epoch); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-released:
		if e != a.Epoch {
			t.Errorf("released epoch %d, want %d", e, a.Epoch)
		}
	case <-ctx.Done():
		t.Fatal("no release announced")
	}
	b, held := acquire(t, s, pool, "host-b", 0, long)
	if !held || b.Epoch != a.Epoch+1 {
		t.Errorf("host-b after the release: %+v held=%v, want epoch %d", b, held, a.Epoch+1)
	}
	t.Logf("FIGURE redis store handover: Release, the announcement, and the next host's Acquire in %s", time.Since(began).Round(10*time.Microsecond))
	// stop ends the subscription: its channel closes.
	stop()
	for open := true; open; {
		select {
		case _, open = <-released:
		case <-ctx.Done():
			t.Fatal("the released channel stayed open after stop")
		}
	}
}

// Members are aged by the server's clock, and pruned after the retention.
func TestRedisMembers(t *testing.T) {
	const pool = "t_members"
	s, raw := server(t, pool)
	ctx := context.Background()
	a := fleet.Member{ID: "host-a", Capacity: 8, Live: 3, Starting: 1, Draining: 2, Version: "0.9"}
	if err := s.Heartbeat(ctx, pool, a); err != nil {
		t.Fatal(err)
	}
	time.Sleep(ttl)
	if err := s.Heartbeat(ctx, pool, fleet.Member{ID: "host-b", Capacity: 4}); err != nil {
		t.Fatal(err)
	}
	ms, now, err := s.Members(ctx, pool)
	if err != nil || len(ms) != 2 {
		t.Fatalf("members = %+v, %v", ms, err)
	}
	by := map[string]fleet.Member{}
	for _, m := range ms {
		by[m.ID] = m
	}
	got := by["host-a"]
	got.SeenAt = time.Time{}
	if got != a {
		t.Errorf("host-a = %+v, want %+v", got, a)
	}
	ageA, ageB := now.Sub(by["host-a"].SeenAt), now.Sub(by["host-b"].SeenAt)
	if ageA < ttl || ageB < 0 || ageB >= ageA-ttl+time.Millisecond {
		t.Errorf("ages by the server's clock: host-a %s, host-b %s; want host-a's at least %s more", ageA, ageB, ttl)
	}
	serverNow, err := raw.Time(ctx).Result()
	if err != nil || now.After(serverNow) || serverNow.Sub(now) > 5*time.Second {
		t.Errorf("Members' now %s, the server's TIME then %s (%v)", now, serverNow, err)
	}

	// A member silent past the retention is pruned by the next heartbeat.
	short := New(config.Conn{URL: os.Getenv("FLEXIQ_TEST_REDIS_URL")}, Options{MemberRetention: ttl})
	defer short.Close()
	time.Sleep(ttl)
	if err := short.Heartbeat(ctx, pool, fleet.Member{ID: "host-b", Capacity: 4}); err != nil {
		t.Fatal(err)
	}
	ms, _, err = s.Members(ctx, pool)
	if err != nil || len(ms) != 1 || ms[0].ID != "host-b" {
		t.Errorf("after host-a's retention: %+v, %v; want host-b alone", ms, err)
	}
	k, _ := poolKeys(pool)
	if n, _ := raw.ZCard(ctx, k.seen).Result(); n != 1 {
		t.Errorf("seen holds %d members, want 1", n)
	}
}

// A plan comes back as written, with the epoch and the server's time.
func TestRedisPlan(t *testing.T) {
	const pool = "t_plan"
	s, _ := server(t, pool)
	ctx := context.Background()
	p, before, err := s.ReadPlan(ctx, pool)
	if err != nil || p.Epoch != 0 || before.IsZero() {
		t.Fatalf("no plan yet: %+v at %s, %v", p, before, err)
	}
	l, _ := acquire(t, s, pool, "host-a", 0, time.Minute)
	want := fleet.Plan{Epoch: l.Epoch, Target: 7, Shares: map[string]int{"host-a": 3, "host-b": 4}, State: []byte("windows\x00\xff")}
	if err := s.WritePlan(ctx, pool, "host-a", l.Epoch, fleet.Plan{Epoch: 12345, Target: 7, Shares: want.Shares, State: want.State, At: time.Unix(1, 0)}); err != nil {
		t.Fatal(err)
	}
	got, now, err := s.ReadPlan(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	if got.At.Before(before) || got.At.After(now) {
		t.Errorf("plan written at %s, want the server's time between %s and %s", got.At, before, now)
	}
	got.At = time.Time{}
	if got.Epoch != want.Epoch || got.Target != want.Target || string(got.State) != string(want.State) || len(got.Shares) != 2 || got.Shares["host-b"] != 4 {
		t.Errorf("plan = %+v, want %+v", got, want)
	}
}

// Every method is one command on the server (MONITOR's feed, which shows
// what the clients sent, retries included, apart from what scripts ran),
// the store's counter agrees, and no method dials again.
func TestRedisRoundTrips(t *testing.T) {
	const pool = "t_trips"
	s, raw := server(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// A script the server does not hold (flushed here, as a restart
	// would) is sent by its digest, refused (NOSCRIPT) and sent whole,
	// once.
	if err := raw.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	sent := monitor(t, ctx, raw)
	connections := func() string {
		info, err := raw.Info(ctx, "stats").Result()
		if err != nil {
			t.Fatal(err)
		}
		return regexp.MustCompile(`total_connections_received:\d+`).FindString(info)
	}
	// The first call dials: go-redis says HELLO 2 on a new connection,
	// once per connection, not per call.
	first := sent(func() error { _, _, err := s.ReadPlan(ctx, pool); return err })
	if len(first) != 3 || !strings.Contains(first[0], `"hello"`) || !strings.Contains(first[1], `"evalsha"`) || !strings.Contains(first[2], `"eval"`) {
		t.Errorf("first call on a new connection, no script loaded: %q, want HELLO, EVALSHA, EVAL", first)
	}
	if again := sent(func() error { _, _, err := s.ReadPlan(ctx, pool); return err }); len(again) != 1 || !strings.Contains(again[0], `"evalsha"`) {
		t.Errorf("the second call: %q, want one EVALSHA", again)
	}
	var epoch uint64
	methods := []struct {
		name string
		call func() error
	}{
		{"Acquire", func() error { l, _, err := s.Acquire(ctx, pool, "host-a", 0, time.Minute); epoch = l.Epoch; return err }},
		{"Acquire (renew)", func() error { _, _, err := s.Acquire(ctx, pool, "host-a", epoch, time.Minute); return err }},
		{"Heartbeat", func() error { return s.Heartbeat(ctx, pool, fleet.Member{ID: "host-a", Capacity: 2}) }},
		{"Members", func() error { _, _, err := s.Members(ctx, pool); return err }},
		{"WritePlan", func() error { return s.WritePlan(ctx, pool, "host-a", epoch, fleet.Plan{Target: 1}) }},
		{"WritePlan (fenced)", func() error {
			if err := s.WritePlan(ctx, pool, "host-b", epoch, fleet.Plan{}); !errors.Is(err, fleet.ErrFenced) {
				return errors.New("not fenced")
			}
			return nil
		}},
		{"ReadPlan", func() error { _, _, err := s.ReadPlan(ctx, pool); return err }},
		{"Release", func() error { return s.Release(ctx, pool, "host-a", epoch) }},
	}
	warm := make([]func() error, len(methods)) // every script loaded once
	for i, m := range methods {
		warm[i] = m.call
	}
	sent(warm...)
	conns := connections()
	byName := map[string]func() error{}
	for _, m := range methods {
		byName[m.name] = m.call
		trips := s.RoundTrips()
		n := sent(m.call)
		if len(n) != 1 || !strings.Contains(n[0], `"evalsha"`) || s.RoundTrips()-trips != 1 {
			t.Errorf("%s: %d commands sent %q, %d counted by the store; want 1", m.name, len(n), n, s.RoundTrips()-trips)
		}
	}
	if now := connections(); now != conns {
		t.Errorf("new connections during the calls: %s, then %s", conns, now)
	}
	// One tick of each role.
	leader := sent(byName["Acquire"], byName["Heartbeat"], byName["Members"], byName["WritePlan"])
	follower := sent(byName["Heartbeat"], byName["ReadPlan"])
	if len(leader) != 4 || len(follower) != 2 {
		t.Errorf("commands per tick: leader %d, follower %d; want 4 and 2", len(leader), len(follower))
	}
	t.Logf("FIGURE redis store commands per tick: follower %d (Heartbeat, ReadPlan), leader %d (Acquire, Heartbeat, Members, WritePlan); whole fleet of 3: %d, of 100: %d",
		len(follower), len(leader), len(leader)+2*len(follower), len(leader)+99*len(follower))
}

// monitor follows the server's MONITOR feed, on a connection of its own
// (plain RESP: go-redis's Monitor shares its pool); the function it
// returns runs calls and returns the commands that clients other than raw
// sent meanwhile (a script's own commands are left out: MONITOR marks
// them "lua"). An ECHO through raw marks the end.
func monitor(t *testing.T, ctx context.Context, raw *redis.Client) func(calls ...func() error) []string {
	t.Helper()
	conn, err := net.Dial("tcp", raw.Options().Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if dl, ok := ctx.Deadline(); ok {
		conn.SetReadDeadline(dl)
	}
	feed := bufio.NewReader(conn)
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := feed.ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("MONITOR: %q %v", line, err)
	}
	mark := 0
	return func(calls ...func() error) []string {
		for _, c := range calls {
			if err := c(); err != nil {
				t.Fatal(err)
			}
		}
		mark++
		echo := fmt.Sprintf(`"echo" "mark-%d"`, mark)
		if err := raw.Echo(ctx, fmt.Sprintf("mark-%d", mark)).Err(); err != nil {
			t.Fatal(err)
		}
		var cmds []string
		for {
			line, err := feed.ReadString('\n')
			if err != nil {
				t.Fatalf("MONITOR's feed: %v", err)
			}
			switch {
			case strings.Contains(line, echo):
				return cmds
			case strings.Contains(line, " lua]"), strings.Contains(line, `"info"`), strings.Contains(line, `"echo" "mark-`):
			default:
				cmds = append(cmds, strings.TrimSpace(line))
			}
		}
	}
}
