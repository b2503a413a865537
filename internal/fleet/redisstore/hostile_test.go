package redisstore

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Writes anyone who can write the fleet's keys can make (issue 27, item
// 3): none of them may stop the store from giving a lease, taking a plan
// or listing the members once the writer stops.
func TestRedisHostileWrites(t *testing.T) {
	const pool = "t_hostile"
	s, raw := server(t, pool)
	ctx := context.Background()
	k, _ := poolKeys(pool)
	huge := strconv.FormatUint(math.MaxInt64, 10)
	set := func(kv ...string) {
		t.Helper()
		for i := 0; i+1 < len(kv); i += 2 {
			if err := raw.Set(ctx, kv[i], kv[i+1], 0).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Run("huge epochs are taken over", func(t *testing.T) {
		dropPool(t, raw, pool)
		set(k.lease, "evil:"+huge, k.epoch, huge)
		raw.PExpire(ctx, k.lease, ttl)
		raw.HSet(ctx, k.plan, "epoch", huge, "at", "1", "plan", `{"v":1,"target":0,"shares":{}}`)
		l, held, err := s.Acquire(ctx, pool, "host-a", 7, time.Minute)
		if err != nil || !held || l.Epoch != 8 {
			t.Fatalf("acquire over a lease of epoch 2^63-1: %+v held=%v %v, want host-a at epoch 8", l, held, err)
		}
		if _, _, err := s.ReadPlan(ctx, pool); !errors.Is(err, fleet.ErrBadPlan) {
			t.Errorf("the plan of epoch 2^63-1: %v, want ErrBadPlan", err)
		}
		if err := s.WritePlan(ctx, pool, "host-a", l.Epoch, fleet.Plan{Target: 2}); err != nil {
			t.Errorf("the leader's plan over it: %v", err)
		}
		if p, _, err := s.ReadPlan(ctx, pool); err != nil || p.Epoch != 8 || p.Target != 2 {
			t.Errorf("plan after: %+v %v, want the leader's", p, err)
		}
	})
	t.Run("a host that remembers a huge epoch", func(t *testing.T) {
		dropPool(t, raw, pool)
		l, held, err := s.Acquire(ctx, pool, "host-a", math.MaxInt64, time.Minute)
		if err != nil || !held || !fleet.ValidEpoch(l.Epoch) {
			t.Fatalf("acquire with a known epoch of 2^63-1: %+v held=%v %v", l, held, err)
		}
	})
	t.Run("an epoch counter that is not a number", func(t *testing.T) {
		dropPool(t, raw, pool)
		set(k.epoch, "not-a-number")
		l, held, err := s.Acquire(ctx, pool, "host-a", 3, time.Minute)
		if err != nil || !held || l.Epoch != 4 {
			t.Fatalf("acquire: %+v held=%v %v, want epoch 4", l, held, err)
		}
	})
	t.Run("a lease that never expires, or outlives ten ttls and a minute, is taken over", func(t *testing.T) {
		dropPool(t, raw, pool)
		set(k.lease, "evil:5", k.epoch, "5")
		l, held, err := s.Acquire(ctx, pool, "host-a", 0, time.Minute)
		if err != nil || !held || l.Epoch != 6 {
			t.Fatalf("acquire over a lease without expiry: %+v held=%v %v, want epoch 6", l, held, err)
		}
		// One within twice the ttl is obeyed.
		dropPool(t, raw, pool)
		set(k.epoch, "5")
		raw.Set(ctx, k.lease, "other:5", 9*time.Minute)
		if l, held, err := s.Acquire(ctx, pool, "host-a", 0, time.Minute); err != nil || held || l.Holder != "other" {
			t.Errorf("a live lease of 9 min at a ttl of 1 min: %+v held=%v %v, want other's, obeyed", l, held, err)
		}
		raw.Set(ctx, k.lease, "other:5", 12*time.Minute)
		if l, held, err := s.Acquire(ctx, pool, "host-a", 0, time.Minute); err != nil || !held || l.Epoch != 6 {
			t.Errorf("a lease of 12 min at a ttl of 1 min: %+v held=%v %v, want taken over at epoch 6", l, held, err)
		}
	})
	t.Run("a plan above the lease's epoch", func(t *testing.T) {
		dropPool(t, raw, pool)
		l, _ := acquire(t, s, pool, "host-a", 0, time.Minute)
		raw.HSet(ctx, k.plan, "epoch", strconv.FormatUint(l.Epoch+100, 10), "at", "1", "plan", `{"v":1,"target":0,"shares":{}}`)
		if _, now, err := s.ReadPlan(ctx, pool); !errors.Is(err, fleet.ErrBadPlan) || now.IsZero() {
			t.Errorf("read: %v (now %s), want ErrBadPlan with the server's clock", err, now)
		}
		if err := s.WritePlan(ctx, pool, "host-a", l.Epoch, fleet.Plan{Target: 2}); err != nil {
			t.Errorf("the leader's plan over it: %v, want written", err)
		}
	})
	t.Run("a member this daemon cannot read", func(t *testing.T) {
		dropPool(t, raw, pool)
		if err := s.Heartbeat(ctx, pool, fleet.Member{ID: "host-a", Capacity: 3}); err != nil {
			t.Fatal(err)
		}
		raw.HSet(ctx, k.members, "host-v2", `{"v":2}`, "host-junk", "{")
		raw.ZAdd(ctx, k.seen)
		ms, _, err := s.Members(ctx, pool)
		if err != nil {
			t.Fatalf("members with undecodable entries: %v, want the others", err)
		}
		got := map[string]string{}
		for _, m := range ms {
			got[m.ID] = m.Invalid
		}
		if len(got) != 3 || got["host-a"] != "" || !strings.Contains(got["host-v2"], "version 2") || got["host-junk"] == "" {
			t.Errorf("members %+v, want host-a read and the two others invalid", ms)
		}
	})
}
