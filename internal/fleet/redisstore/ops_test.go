package redisstore

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/redis/go-redis/v9"
)

// systemctl runs systemctl inside the sandbox (this test binary runs
// there: see server).
func systemctl(t *testing.T, verb, unit string) {
	t.Helper()
	if out, err := exec.Command("systemctl", verb, unit).CombinedOutput(); err != nil {
		t.Fatalf("systemctl %s %s: %v\n%s", verb, unit, err, out)
	}
}

// A stopped server is an error that says so; once it is back, the same
// store works again, and the epoch went on from where it was: Debian's
// redis-server saves its snapshot when it stops.
func TestRedisServerRestart(t *testing.T) {
	unit := os.Getenv("FLEXIQ_TEST_REDIS_UNIT")
	if unit == "" {
		t.Skip("needs FLEXIQ_TEST_REDIS_UNIT, the server's unit, to stop and start it (test/e2e sets it inside its sandbox)")
	}
	const pool = "t_restart"
	s, _ := server(t, pool)
	ctx := context.Background()
	a, _ := acquire(t, s, pool, "host-a", 0, time.Minute)
	if err := s.WritePlan(ctx, pool, "host-a", a.Epoch, fleet.Plan{Target: 5}); err != nil {
		t.Fatal(err)
	}

	systemctl(t, "stop", unit)
	t.Cleanup(func() { exec.Command("systemctl", "start", unit).Run() })
	calls := map[string]func() error{
		"acquire": func() error { _, _, err := s.Acquire(ctx, pool, "host-a", a.Epoch, time.Minute); return err },
		"read":    func() error { _, _, err := s.ReadPlan(ctx, pool); return err },
		"write":   func() error { return s.WritePlan(ctx, pool, "host-a", a.Epoch, fleet.Plan{Target: 5}) },
		"beat":    func() error { return s.Heartbeat(ctx, pool, fleet.Member{ID: "host-a"}) },
	}
	for name, call := range calls {
		err := call()
		if err == nil || !strings.Contains(err.Error(), "fleet store redis://127.0.0.1:6379: unreachable") || !strings.Contains(err.Error(), "fleet pool "+pool) {
			t.Errorf("%s with the server stopped: %v, want an unreachable error naming the pool and the server", name, err)
		}
	}

	systemctl(t, "start", unit)
	var l fleet.Lease
	var held bool
	var err error
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l, held, err = s.Acquire(ctx, pool, "host-a", a.Epoch, time.Minute); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Fatalf("the store never recovered: %v", err)
	}
	if !held || l.Epoch != a.Epoch {
		t.Errorf("after the restart host-a renews: %+v held=%v, want its lease at epoch %d (kept by the snapshot)", l, held, a.Epoch)
	}
	p, _, err := s.ReadPlan(ctx, pool)
	if err != nil || p.Epoch != a.Epoch || p.Target != 5 {
		t.Errorf("plan after the restart: %+v, %v", p, err)
	}

	// systemctl restart, as an upgrade of the server would: the same.
	systemctl(t, "restart", unit)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if l, held, err = s.Acquire(ctx, pool, "host-a", a.Epoch, time.Minute); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil || !held || l.Epoch != a.Epoch {
		t.Errorf("after systemctl restart: %+v held=%v %v, want host-a's lease at epoch %d", l, held, err, a.Epoch)
	}
}

// A Redis that lost its data (a crash without AOF) loses the epoch
// counter: the next acquisition still goes above the stored plan's epoch,
// or, if the plan is gone too, above the epoch the caller knew.
func TestRedisDataLoss(t *testing.T) {
	const pool = "t_loss"
	s, raw := server(t, pool)
	ctx := context.Background()
	k, _ := poolKeys(pool)
	for range 3 { // epochs 1 to 3
		l, _ := acquire(t, s, pool, "host-a", 0, time.Minute)
		if err := s.Release(ctx, pool, "host-a", l.Epoch); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := acquire(t, s, pool, "host-a", 0, time.Minute)
	if a.Epoch != 4 {
		t.Fatalf("fourth acquisition at epoch %d", a.Epoch)
	}
	if err := s.WritePlan(ctx, pool, "host-a", a.Epoch, fleet.Plan{Target: 2}); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		lost  []string
		known uint64
		want  uint64
	}{
		{"counter and lease lost, plan of epoch 4 kept", []string{k.epoch, k.lease}, 0, 5},
		{"everything lost, the caller knew 9", []string{k.epoch, k.lease, k.plan}, 9, 10},
		// The documented limit: a host that knew less starts lower.
		{"everything lost, the caller knew 1", []string{k.epoch, k.lease, k.plan}, 1, 2},
	}
	for _, tc := range tests {
		dropPool(t, raw, pool, tc.lost...)
		b, held := acquire(t, s, pool, "host-b", tc.known, time.Minute)
		if !held || b.Epoch != tc.want {
			t.Errorf("%s: host-b at %+v held=%v, want epoch %d", tc.name, b, held, tc.want)
		}
		// The old leader is fenced whatever the epochs.
		if err := s.WritePlan(ctx, pool, "host-a", a.Epoch, fleet.Plan{}); !IsFenced(err) {
			t.Errorf("%s: the old leader's plan: %v, want ErrFenced", tc.name, err)
		}
		if err := s.WritePlan(ctx, pool, "host-b", b.Epoch, fleet.Plan{Target: 3}); err != nil {
			t.Errorf("%s: the new leader's plan: %v", tc.name, err)
		}
	}
}

// A user restricted to what the package doc lists, authenticated by a
// password_file as a source would be, runs every method; without the
// fleet's key pattern it is refused, and the error says so.
func TestRedisACL(t *testing.T) {
	const pool, user = "t_acl", "flexiq_fleet_test"
	_, raw := server(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	perms := strings.Fields(DaemonACL)
	setUser := func(perms ...string) {
		args := []any{"ACL", "SETUSER", user, "reset", "on", ">s3cret"}
		for _, p := range perms {
			args = append(args, p)
		}
		if err := raw.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	setUser(perms...)
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })
	pw := t.TempDir() + "/pw"
	if err := os.WriteFile(pw, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(os.Getenv("FLEXIQ_TEST_REDIS_URL"), "://", "://"+user+"@", 1)
	s := New(config.Conn{URL: url, PasswordFile: pw}, Options{})
	defer s.Close()

	released, stop, err := s.Released(ctx, pool)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	l, held, err := s.Acquire(ctx, pool, "host-a", 0, time.Minute)
	if err != nil || !held {
		t.Fatalf("acquire as %s: %+v %v %v", user, l, held, err)
	}
	steps := []func() error{
		func() error { return s.Heartbeat(ctx, pool, fleet.Member{ID: "host-a"}) },
		func() error { _, _, err := s.Members(ctx, pool); return err },
		func() error { return s.WritePlan(ctx, pool, "host-a", l.Epoch, fleet.Plan{Target: 1}) },
		func() error { _, _, err := s.ReadPlan(ctx, pool); return err },
		func() error { return s.Release(ctx, pool, "host-a", l.Epoch) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Errorf("step %d as %s: %v", i, user, err)
		}
	}
	select {
	case <-released:
	case <-ctx.Done():
		t.Error("no release announced to the restricted user")
	}

	setUser(perms[:len(perms)-2]...) // no keys, no channels
	_, _, err = s.ReadPlan(ctx, pool)
	if err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Errorf("read plan without the key pattern: %v, want NOPERM", err)
	}
}

// The workers' user of the same Redis, as docs/fleet.md has it (its
// queue's keys and channels, every command but the dangerous ones), can
// use its queue but can neither read nor write the fleet's keys, by a
// command or a script, nor publish a release (issue 27, item 3).
func TestRedisACLWorkerDenied(t *testing.T) {
	const pool, user = "t_aclw", "flexiq_worker_test"
	_, raw := server(t, pool)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []any{"ACL", "SETUSER", user, "reset", "on", ">w0rker"}
	for _, p := range strings.Fields(WorkerACLExample) {
		args = append(args, p)
	}
	if err := raw.Do(ctx, args...).Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Do(context.Background(), "ACL", "DELUSER", user) })
	opts := *raw.Options()
	opts.Username, opts.Password = user, "w0rker"
	w := redis.NewClient(&opts)
	defer w.Close()
	if err := w.LPush(ctx, "bull:mail:wait", "job-1").Err(); err != nil {
		t.Fatalf("the worker's own queue: %v", err)
	}
	w.Del(ctx, "bull:mail:wait")
	k, _ := poolKeys(pool)
	for name, cmd := range map[string]*redis.Cmd{
		"GET lease":      w.Do(ctx, "GET", k.lease),
		"SET lease":      w.Do(ctx, "SET", k.lease, "evil:9223372036854775807"),
		"HSET plan":      w.Do(ctx, "HSET", k.plan, "epoch", "1"),
		"HSET members":   w.Do(ctx, "HSET", k.members, "evil", `{"v":2}`),
		"ZADD seen":      w.Do(ctx, "ZADD", k.seen, "1e15", "evil"),
		"DEL epoch":      w.Do(ctx, "DEL", k.epoch),
		"EVAL on a key":  w.Do(ctx, "EVAL", "return redis.call('SET', KEYS[1], 'x')", 1, k.lease),
		"EVAL, key hid":  w.Do(ctx, "EVAL", "return redis.call('SET', ARGV[1], 'x')", 0, k.lease),
		"PUBLISH":        w.Do(ctx, "PUBLISH", k.released, "1"),
		"FLUSHALL":       w.Do(ctx, "FLUSHALL"),
		"CONFIG SET":     w.Do(ctx, "CONFIG", "SET", "appendonly", "no"),
		"KEYS (listing)": w.Do(ctx, "KEYS", "flexiq-scaled:*"),
	} {
		// A script's own redis.call is refused by its message, not a
		// NOPERM code.
		if err := cmd.Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") && !strings.Contains(err.Error(), "can't access") {
			t.Errorf("%s as the workers' user: %v, want NOPERM", name, err)
		}
	}
}
