package fleet

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/fleet/redisstore"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// hostileWriter (issue 27, item 3): a writer of the store (a worker of a
// shared queue Redis without an ACL) makes each write below to the
// running fleet, on both stores at once; after each, the fleet has a
// leader whose plans every host applies again within TTL + a tick, and
// the fleet's total never drops below its target meanwhile (no host over
// its capacity: the recorder checks that all along). The recorder holds
// the store's epochs to never decrease, those above 2^53 aside: the huge
// epoch's garbage, which the daemons take as absent.
func (c *cluster) hostileWriter(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rk := redisstore.Prefix + "{bull}:"
	redisDo := func(args ...any) error { return c.stores.redis.Do(ctx, args...).Err() }
	pgDo := func(sql string) error {
		err := c.stores.query(ctx, sql+" RETURNING 1", nil, new(int))
		if err != nil && strings.Contains(err.Error(), "no rows") {
			return nil
		}
		return err
	}
	writes := []struct {
		name  string
		redis func() error
		pg    func() error
	}{
		// 2^63-1 overflowed the Lua arithmetic and held every host off
		// the lease for good, even once deleted (PostgreSQL: the
		// daemons' highest epoch seen).
		{"huge_epoch", func() error {
			const huge = "9223372036854775807"
			if err := redisDo("SET", rk+"epoch", huge); err != nil {
				return err
			}
			if err := redisDo("HSET", rk+"plan", "epoch", huge); err != nil {
				return err
			}
			return redisDo("SET", rk+"lease", "evil#x:"+huge, "PX", "60000")
		}, func() error {
			return pgDo("UPDATE flexiq_fleet_lease SET holder = 'evil#x', epoch = 9223372036854775807, expires_at = now() + interval '1 minute' WHERE pool = 'river'")
		}},
		{"future_plan", func() error {
			at, err := c.stores.redis.Time(ctx).Result()
			if err != nil {
				return err
			}
			return redisDo("HSET", rk+"plan", "at", fmt.Sprint(at.Add(time.Hour).UnixMilli()), "plan", `{"v":1,"target":0,"shares":{}}`)
		}, func() error {
			return pgDo("UPDATE flexiq_fleet_plan SET written_at = now() + interval '1 hour', shares = '{}' WHERE pool = 'river'")
		}},
		{"unreadable_member", func() error {
			if err := redisDo("HSET", rk+"members", "v2-host", `{"v":2}`); err != nil {
				return err
			}
			return redisDo("ZADD", rk+"seen", fmt.Sprint(time.Now().UnixMilli()), "v2-host")
		}, nil},
		{"maxint_live", func() error {
			if err := redisDo("HSET", rk+"members", "evil", `{"v":1,"capacity":0,"live":9223372036854775807,"draining":9223372036854775807}`); err != nil {
				return err
			}
			return redisDo("ZADD", rk+"seen", fmt.Sprint(time.Now().UnixMilli()), "evil")
		}, func() error {
			return pgDo("INSERT INTO flexiq_fleet_member VALUES ('river', 'evil', 0, 2147483647, 0, 2147483647, 'x', now())" +
				" ON CONFLICT (pool, host) DO UPDATE SET live = 2147483647, seen_at = now()")
		}},
		{"future_seen_at", func() error {
			if err := redisDo("HSET", rk+"members", "ghost", `{"v":1,"capacity":10}`); err != nil {
				return err
			}
			return redisDo("ZADD", rk+"seen", fmt.Sprint(time.Now().Add(24*time.Hour).UnixMilli()), "ghost")
		}, func() error {
			return pgDo("INSERT INTO flexiq_fleet_member VALUES ('river', 'ghost', 10, 0, 0, 0, 'x', now() + interval '1 day')" +
				" ON CONFLICT (pool, host) DO UPDATE SET seen_at = now() + interval '1 day'")
		}},
	}
	target := min(expectedTarget(c.backlogNow()), capacityOf(c.live()))
	for _, w := range writes {
		from := time.Now()
		// The writer writes for two ticks, as a loop of a worker would.
		for end := from.Add(2 * tick); time.Now().Before(end); time.Sleep(tick / 4) {
			if err := w.redis(); err != nil {
				t.Fatalf("%s on redis: %v", w.name, err)
			}
			if w.pg != nil {
				if err := w.pg(); err != nil {
					t.Fatalf("%s on postgres: %v", w.name, err)
				}
			}
		}
		stop := time.Now()
		for _, p := range pools {
			if p.store == "postgres" && w.pg == nil {
				continue
			}
			var took time.Duration
			ok, why := sandbox.Eventually(ttlD+tick+margin, func() (bool, string) {
				rd, s := c.rec.last(p.name)
				if c.byID(s.Holder) == nil || !s.PlanAt.After(stop) || s.PlanEpoch != s.LeaseEpoch {
					return false, fmt.Sprintf("store: holder %q, plan epoch %d at %s, lease epoch %d", s.Holder, s.PlanEpoch, s.PlanAt, s.LeaseEpoch)
				}
				for _, h := range c.live() {
					f := rd.Hosts[h.name][p.name].Fleet
					if f == nil || f.Phase != "fresh" || f.PlanEpoch != s.PlanEpoch {
						return false, fmt.Sprintf("%s: %+v", h.name, f)
					}
				}
				took = rd.At.Sub(stop)
				return true, ""
			})
			if !ok {
				t.Errorf("%s, %s: no leader whose plans every host applies within TTL + a tick (+ margin) of the write's end: %s", w.name, p.name, why)
				continue
			}
			if low := c.minTotal(p.name, from); low < target {
				t.Errorf("%s, %s: the fleet's total fell to %d, below its target %d", w.name, p.name, low, target)
			}
			c.figure(t, p.name, "hostile_write", "write", w.name, "leader_recovered", max(took, 0), "bound", ttlD+tick)
		}
	}
	// The writer's leftovers: the members pruned by hand (a silent member
	// stays listed for an hour, which is harmless but shows in status).
	redisDo("HDEL", rk+"members", "v2-host", "evil", "ghost")
	redisDo("ZREM", rk+"seen", "v2-host", "evil", "ghost")
	pgDo("DELETE FROM flexiq_fleet_member WHERE pool = 'river' AND host IN ('evil', 'ghost')")
}

// backlogNow is the bull queue's backlog (both pools hold the same).
func (c *cluster) backlogNow() int {
	n, err := c.stores.backlog(context.Background(), "bull")
	if err != nil {
		c.t.Fatal(err)
	}
	return n
}
