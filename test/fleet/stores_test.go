package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/flexiq/flexiq-scaled/internal/fleet/coord"
	"github.com/flexiq/flexiq-scaled/internal/fleet/redisstore"
	"github.com/flexiq/flexiq-scaled/test/harness"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// The test reads the stores straight, not through the daemons: the lease's
// holder and epoch and the plan's epoch, time and shares, as the servers
// hold them (the keys of internal/fleet/redisstore, the tables of
// internal/fleet/pgstore), and the queues' backlogs. The host has no
// address on the fleet's bridge, so the test's connections are dialled
// from inside the server sandbox's network namespace (nsDialer).

// nsDialer dials from inside the network namespace of pid
// (sandbox.InNetns): the socket stays there, wherever it is used.
func nsDialer(pid int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (c net.Conn, err error) {
		err = sandbox.InNetns(pid, func() (err error) {
			c, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// storeSample is one read of a pool's coordination in its store.
type storeSample struct {
	// Holder is the host id of the lease's holder ("" when none holds
	// it), Term the holder as the store keeps it (HOST#INCARNATION: a
	// restarted daemon is another term), LeaseEpoch the lease's epoch,
	// Counter the highest epoch given (the Redis epoch key; the Postgres
	// lease row's epoch, which a release keeps).
	Holder     string `json:"holder"`
	Term       string `json:"term"`
	LeaseEpoch uint64 `json:"lease_epoch"`
	Counter    uint64 `json:"counter"`
	// PlanEpoch, PlanAt and Target are the stored plan's (zero: none).
	PlanEpoch uint64         `json:"plan_epoch"`
	PlanAt    time.Time      `json:"plan_at"`
	Target    int            `json:"target"`
	Shares    map[string]int `json:"shares,omitempty"`
	Err       string         `json:"err,omitempty"`
}

// stores holds the test's connections to both servers.
type stores struct {
	redis *redis.Client
	pgCfg *pgx.ConnConfig
	srv   *sandbox.Sandbox

	mu sync.Mutex // guards pg
	pg *pgx.Conn
}

func openStores(t *testing.T, srv *sandbox.Sandbox, pgURL string) *stores {
	t.Helper()
	dial := nsDialer(srv.PID)
	s := &stores{srv: srv, redis: redis.NewClient(&redis.Options{
		Addr: net.JoinHostPort(srv.IP().String(), "6379"), Dialer: dial,
		DialTimeout: 2 * time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		MaxRetries: -1, PoolSize: 4,
	})}
	cfg, err := pgx.ParseConfig(strings.Replace(pgURL, pgUser+"@", pgUser+":"+pgPassword+"@", 1) + "&connect_timeout=2")
	if err != nil {
		t.Fatal(err)
	}
	cfg.DialFunc = dial
	s.pgCfg = cfg
	t.Cleanup(func() {
		s.redis.Close()
		s.mu.Lock()
		if s.pg != nil {
			s.pg.Close(context.Background())
		}
		s.mu.Unlock()
	})
	return s
}

// query runs one PostgreSQL query on the test's connection, reconnecting
// after a failure (a server restart).
func (s *stores) query(ctx context.Context, sql string, args []any, dest ...any) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pg == nil {
		c, err := pgx.ConnectConfig(ctx, s.pgCfg)
		if err != nil {
			return err
		}
		s.pg = c
	}
	err := s.pg.QueryRow(ctx, sql, args...).Scan(dest...)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		s.pg.Close(context.Background())
		s.pg = nil
	}
	return err
}

// read samples pool's lease and plan from its store.
func (s *stores) read(ctx context.Context, pool, store string) storeSample {
	var smp storeSample
	var err error
	if store == "redis" {
		err = s.readRedis(ctx, pool, &smp)
	} else {
		err = s.readPostgres(ctx, pool, &smp)
	}
	if err != nil {
		smp.Err = err.Error()
	}
	return smp
}

func (s *stores) readRedis(ctx context.Context, pool string, smp *storeSample) error {
	p := redisstore.Prefix + "{" + pool + "}:"
	pipe := s.redis.Pipeline()
	lease := pipe.Get(ctx, p+"lease")
	counter := pipe.Get(ctx, p+"epoch")
	plan := pipe.HMGet(ctx, p+"plan", "epoch", "at", "plan")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	if v, err := lease.Result(); err == nil {
		// HOLDER:EPOCH, the epoch after the last colon.
		i := strings.LastIndex(v, ":")
		smp.Term, smp.Holder = v[:max(i, 0)], coord.HostOf(v[:max(i, 0)])
		smp.LeaseEpoch, _ = strconv.ParseUint(v[i+1:], 10, 64)
	}
	if v, err := counter.Uint64(); err == nil {
		smp.Counter = v
	}
	f := plan.Val()
	if len(f) == 3 && f[0] != nil {
		smp.PlanEpoch, _ = strconv.ParseUint(fmt.Sprint(f[0]), 10, 64)
		ms, _ := strconv.ParseInt(fmt.Sprint(f[1]), 10, 64)
		smp.PlanAt = time.UnixMilli(ms)
		var body struct {
			Target int            `json:"target"`
			Shares map[string]int `json:"shares"`
		}
		if err := json.Unmarshal([]byte(fmt.Sprint(f[2])), &body); err != nil {
			return fmt.Errorf("plan of %s: %w", pool, err)
		}
		smp.Target, smp.Shares = body.Target, body.Shares
	}
	return nil
}

func (s *stores) readPostgres(ctx context.Context, pool string, smp *storeSample) error {
	var holder *string
	var leaseEpoch, planEpoch *int64
	var live *bool
	var at *time.Time
	var target *int32
	var shares []byte
	// The tables are in the fleet role's search_path (public), where the
	// daemons' pgstore creates them.
	err := s.query(ctx, `SELECT l.holder, l.epoch, l.expires_at > now(), p.epoch, p.written_at, p.target, p.shares
FROM (SELECT $1::text AS pool) q
LEFT JOIN flexiq_fleet_lease l ON l.pool = q.pool
LEFT JOIN flexiq_fleet_plan p ON p.pool = q.pool`, []any{pool},
		&holder, &leaseEpoch, &live, &planEpoch, &at, &target, &shares)
	if err != nil {
		// Before the first daemon has created them, the tables are missing.
		if strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		return err
	}
	if leaseEpoch != nil {
		smp.Counter = uint64(*leaseEpoch)
		if holder != nil && *holder != "" && live != nil && *live {
			smp.Term, smp.Holder, smp.LeaseEpoch = *holder, coord.HostOf(*holder), uint64(*leaseEpoch)
		}
	}
	if planEpoch != nil {
		smp.PlanEpoch, smp.PlanAt, smp.Target = uint64(*planEpoch), *at, int(*target)
		if err := json.Unmarshal(shares, &smp.Shares); err != nil {
			return fmt.Errorf("plan of %s: shares %s: %w", pool, shares, err)
		}
	}
	return nil
}

// seen is when the store last heard the host's heartbeat for the pool, on
// the store's clock (the zero time if it holds none).
func (s *stores) seen(ctx context.Context, pool, store, id string) (time.Time, error) {
	if store == "redis" {
		ms, err := s.redis.ZScore(ctx, redisstore.Prefix+"{"+pool+"}:seen", id).Result()
		if errors.Is(err, redis.Nil) {
			return time.Time{}, nil
		}
		return time.UnixMilli(int64(ms)), err
	}
	var at time.Time
	err := s.query(ctx, "SELECT seen_at FROM flexiq_fleet_member WHERE pool = $1 AND host = $2", []any{pool, id}, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return time.Time{}, nil
	}
	return at, err
}

// The queues. Both pools read a queue named "fleet": BullMQ's with the
// default key prefix "bull", River's in schema "river".
const queueName = "fleet"

// backlog reads the pool's pending jobs straight from its queue.
func (s *stores) backlog(ctx context.Context, pool string) (int, error) {
	if pool == "bull" {
		n, err := s.redis.LLen(ctx, "bull:"+queueName+":wait").Result()
		return int(n), err
	}
	var n int
	err := s.query(ctx, "SELECT count(*) FROM river.river_job WHERE queue = $1 AND state = 'available'", []any{queueName}, &n)
	return n, err
}

// enqueue adds n jobs to the pool's queue through the queue system's own
// client, run in the server sandbox against the server's loopback.
func (c *cluster) enqueue(pool string, n int) {
	c.t.Helper()
	root, _ := sandbox.ModuleRoot()
	var argv []string
	if pool == "bull" {
		argv = []string{"node", filepath.Join(root, "test", "clients", "bullmq", "enqueue.js"),
			"redis://127.0.0.1:6379", queueName, "add", strconv.Itoa(n)}
	} else {
		argv = []string{filepath.Join(binDir, "flexiq-river-client"), c.riverURL(), "river", fmt.Sprintf("insert,%s,%d", queueName, n)}
	}
	if out, err := harness.Exec(c.srv, time.Minute, argv...); err != nil {
		c.t.Fatalf("enqueueing %d jobs for %s: %v\n%s", n, pool, err, out)
	}
}

// riverURL is the River client's URL, on the server's loopback.
func (c *cluster) riverURL() string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:5432/%s?sslmode=disable", pgUser, pgPassword, pgUser)
}

// prepareQueues installs BullMQ's client and lays down River's schema
// (its own migrations), so that the daemons' first reads find the queues
// empty rather than missing.
func (c *cluster) prepareQueues() {
	c.t.Helper()
	npmCI(c.t)
	if out, err := harness.Exec(c.srv, 2*time.Minute, filepath.Join(binDir, "flexiq-river-client"), c.riverURL(), "river"); err != nil {
		c.t.Fatalf("River's migrations: %v\n%s", err, out)
	}
}
