// Package redisstore is fleet.Store on Redis (issue 20, "one leader per
// pool, elected by a lease in the store"): the lease, the epoch that
// fences the plan, the members' heartbeats and the plan, kept in the Redis
// the queue already lives in, through the Redis sources' own connection
// (conn.Redis: the same url, url_file, url_credential,
// password_file and password_credential keys, rediss:// for TLS, unix://,
// 5 s timeouts).
//
// # Keys
//
// Every key of pool POOL is under one prefix, Prefix + "{POOL}:", so that
// an admin finds them with `redis-cli --scan --pattern
// 'flexiq-scaled:fleet:*'`; the braces are a hash tag, so that on a Redis
// Cluster all of a pool's keys are in one slot, as its scripts need:
//
//	flexiq-scaled:fleet:{POOL}:lease     string "HOLDER:EPOCH", HOLDER being HOST#INSTANCE (coord.Config.Holder); expires (PX) after the ttl
//	flexiq-scaled:fleet:{POOL}:epoch     integer, the last epoch given; never expires
//	flexiq-scaled:fleet:{POOL}:plan      hash: epoch, at (server ms), plan (JSON {"v":1,"target","shares","state"})
//	flexiq-scaled:fleet:{POOL}:members   hash: host id -> JSON {"v":1,"capacity","live","starting","draining","version"}
//	flexiq-scaled:fleet:{POOL}:seen      sorted set: host id, scored by the server's ms at its last heartbeat
//	flexiq-scaled:fleet:{POOL}:released  pub/sub channel: the epoch of each lease released
//
// Deleting a pool's keys while its hosts run is safe (see below); a member
// silent for longer than Options.MemberRetention is pruned by the next
// heartbeat.
//
// A server with ACLs needs, for the fleet's user (scripts' commands are
// checked too; PING is the subscription's health check; tested):
//
//	+evalsha +eval +subscribe +ping +get +set +del +pexpire +pttl +hget +hset +hmget +hdel +hgetall
//	+zadd +zrange +zrangebyscore +zrem +time +publish ~flexiq-scaled:fleet:* &flexiq-scaled:fleet:*
//
// and the workers' users of the same Redis none of those keys (-@all on
// them is implied by a key pattern that leaves them out, e.g.
// %R~bull:* %W~bull:*): docs/fleet.md has the ACL SETUSER lines.
//
// # Round trips
//
// Every method is one EVALSHA of one script (scripts.go; EVAL once more
// after NOSCRIPT), atomic on the server, with every time from the server's TIME: a follower's tick is 2
// commands (Heartbeat, ReadPlan), a leader's 4 (Acquire, Heartbeat,
// Members, WritePlan), whatever the fleet's size; RoundTrips counts them.
// A new connection adds go-redis's HELLO, once (tested by MONITOR).
//
// # Fencing, and a Redis that loses its data
//
// A renewal needs the lease to be exactly HOLDER:EPOCH; a plan is written
// only by the script that finds the lease to be HOLDER:EPOCH and no stored
// plan of a later epoch. A leader paused past its ttl (SIGSTOP, a slow
// link) comes back to a lease held by another host with a later epoch:
// its renewal and its plan are refused (fleet.ErrFenced), and it learns
// the lease it lost. The comparison is equality with the live lease, not
// "epoch >= stored", so fencing holds even if the epoch counter were lost.
//
// The epoch must still never decrease, as followers ignore a plan with an
// older epoch than one they applied. Debian's redis-server saves a
// snapshot (RDB) when it stops, so `systemctl restart redis-server` keeps
// the counter (tested); a crash or a FLUSHALL without AOF loses it, and
// the plan with it. So an acquisition's epoch is greater than the counter,
// the stored plan's epoch, and the epoch the caller passes,
// which is to be the highest it knows (its lease's, or the last plan's it
// applied): after a total loss, the first host to acquire continues above
// what it knew (tested). A host that had missed the latest plans (cut off
// just then) may still start below what the others applied: they ignore
// its plans as older and hold, then fall back as for a stale plan, never
// scaling down; the planner may accept a lower epoch once it sees the
// store's lease itself carry it for a ttl (not done here). AOF
// (appendonly yes, fsync every second) makes the case all but vanish.
//
// go-redis runs a command again once when a pooled connection turns out
// closed (the sources' MaxRetries = 1); every script is safe to run twice:
// an Acquire that took the lease and runs again finds HOLDER:EPOCH with an
// epoch the caller does not know yet, so it reports the lease as another
// term's and the caller waits for it to expire; a second Release, Heartbeat
// or WritePlan changes nothing more.
//
// # Who calls it
//
// internal/fleet/coord's loop, run by internal/controller for each pool
// that joins a fleet whose store is a redis:// URL; the controller
// subscribes to Released to wake it.
package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/redis/go-redis/v9"
)

// Prefix begins every key and channel of the fleet's.
const Prefix = "flexiq-scaled:fleet:"

// DaemonACL is what the daemons' Redis user needs (ACL SETUSER rules):
// the commands its scripts run and the fleet's keys and channels, nothing
// else (docs/fleet.md; TestRedisACL). A user that also reads the queue
// (a BullMQ source on the same connection) needs the source's rules too.
const DaemonACL = "+evalsha +eval +subscribe +ping +get +set +del +pexpire +pttl +hget +hset +hmget +hdel +hgetall" +
	" +zadd +zrange +zrangebyscore +zrem +time +publish ~flexiq-scaled:fleet:* &flexiq-scaled:fleet:*"

// WorkerACLExample is a workers' user that cannot touch the fleet (issue
// 27): its queues' keys and channels only (Redis has no key pattern that
// excludes, so never ~* or allkeys), and no dangerous command (FLUSHALL,
// CONFIG, KEYS, DEBUG...). A BullMQ queue "mail" under the default
// prefix "bull"; TestRedisACLWorkerDenied checks it is refused every key
// and channel of the fleet.
const WorkerACLExample = "~bull:* &bull:* +@all -@dangerous"

// DefaultMemberRetention is how long a silent member stays listed: long
// past the planner's "gone" (about 3 heartbeats), so that status can show
// a host that left.
const DefaultMemberRetention = time.Hour

// Options tune a Store.
type Options struct {
	// MemberRetention: a member silent for longer is pruned by the next
	// heartbeat. 0 is DefaultMemberRetention.
	MemberRetention time.Duration
}

// Store is fleet.Store on one Redis server.
type Store struct {
	rc        *conn.Redis
	retention time.Duration

	// roundTrips counts the commands sent (one per method): a hook on
	// each client the connection makes.
	roundTrips atomic.Uint64
	mu         sync.Mutex
	hooked     *redis.Client
}

var _ fleet.Store = (*Store)(nil)

// New returns a store on conn's server; it connects at the first call.
func New(c config.Conn, opts Options) *Store {
	if opts.MemberRetention <= 0 {
		opts.MemberRetention = DefaultMemberRetention
	}
	return &Store{rc: conn.NewRedis("fleet", "store", c), retention: opts.MemberRetention}
}

// RoundTrips is the number of commands (scripts, pipelines) sent to the
// server so far, for the metrics and the traffic figures.
func (s *Store) RoundTrips() uint64 { return s.roundTrips.Load() }

// client returns the current client, with the counting hook on it.
func (s *Store) client() (*redis.Client, error) {
	c, err := s.rc.Client()
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hooked != c {
		c.AddHook(counter{&s.roundTrips})
		s.hooked = c
	}
	return c, nil
}

// eval runs one script (EVALSHA, EVAL after NOSCRIPT), and names the
// pool, what failed and the server when it fails.
func (s *Store) eval(ctx context.Context, op, pool string, script *redis.Script, keys []string, args ...any) (any, error) {
	c, err := s.client()
	if err != nil {
		return nil, fmt.Errorf("fleet pool %s: %s: %w", pool, op, err)
	}
	v, err := script.Run(ctx, c, keys, args...).Result()
	if err != nil {
		return nil, fmt.Errorf("fleet pool %s: %s: %w", pool, op, s.rc.Fail(err))
	}
	return v, nil
}

// Acquire implements fleet.Store. epoch is the highest epoch the caller
// knows: its lease's to renew it, else the last plan's it applied (0 if
// none), below which a new acquisition never goes. A host that restarted
// (the same id, its epoch forgotten) does not get its old lease back: it
// waits for it to expire, as matching by id alone is Oban #1488.
func (s *Store) Acquire(ctx context.Context, pool, holder string, epoch uint64, ttl time.Duration) (fleet.Lease, bool, error) {
	k, err := poolKeys(pool)
	if err != nil {
		return fleet.Lease{}, false, err
	}
	ms, err := ttlMS(ttl)
	if err != nil {
		return fleet.Lease{}, false, fmt.Errorf("fleet pool %s: acquire: %w", pool, err)
	}
	if holder == "" {
		return fleet.Lease{}, false, fmt.Errorf("fleet pool %s: acquire: no holder id", pool)
	}
	v, err := s.eval(ctx, "acquire", pool, acquireLua, []string{k.lease, k.epoch, k.plan}, holder, strconv.FormatUint(epoch, 10), ms)
	if err != nil {
		return fleet.Lease{}, false, err
	}
	l, held, _, err := decodeLease(v)
	if err != nil {
		return fleet.Lease{}, false, fmt.Errorf("fleet pool %s: acquire: %w", pool, err)
	}
	return l, held, nil
}

// Release implements fleet.Store: a lease another holder or epoch holds is
// left alone, without error.
func (s *Store) Release(ctx context.Context, pool, holder string, epoch uint64) error {
	k, err := poolKeys(pool)
	if err != nil {
		return err
	}
	_, err = s.eval(ctx, "release", pool, releaseLua, []string{k.lease}, holder, strconv.FormatUint(epoch, 10), k.released)
	return err
}

// Heartbeat implements fleet.Store; m.SeenAt is ignored (the server's
// clock is used).
func (s *Store) Heartbeat(ctx context.Context, pool string, m fleet.Member) error {
	k, err := poolKeys(pool)
	if err != nil {
		return err
	}
	body, err := encodeMember(m)
	if err != nil {
		return fmt.Errorf("fleet pool %s: heartbeat: %w", pool, err)
	}
	_, err = s.eval(ctx, "heartbeat", pool, heartbeatLua, []string{k.members, k.seen}, m.ID, body, s.retention.Milliseconds())
	return err
}

// Members implements fleet.Store, in the order of the members hash.
func (s *Store) Members(ctx context.Context, pool string) ([]fleet.Member, time.Time, error) {
	k, err := poolKeys(pool)
	if err != nil {
		return nil, time.Time{}, err
	}
	v, err := s.eval(ctx, "members", pool, membersLua, []string{k.members, k.seen})
	if err != nil {
		return nil, time.Time{}, err
	}
	ms, now, err := decodeMembers(v)
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("fleet pool %s: members: %w", pool, err)
	}
	return ms, now, nil
}

// WritePlan implements fleet.Store. The plan is stored with epoch (p.Epoch
// is ignored) and the server's time (p.At is ignored).
func (s *Store) WritePlan(ctx context.Context, pool, holder string, epoch uint64, p fleet.Plan) error {
	k, err := poolKeys(pool)
	if err != nil {
		return err
	}
	body, err := encodePlan(p)
	if err != nil {
		return fmt.Errorf("fleet pool %s: plan: %w", pool, err)
	}
	v, err := s.eval(ctx, "write plan", pool, writePlanLua, []string{k.lease, k.plan}, holder, strconv.FormatUint(epoch, 10), body)
	if err != nil {
		return err
	}
	if n, err := replyInt(v); err != nil || n == 0 {
		return fmt.Errorf("fleet pool %s: plan of %s at epoch %d: %w", pool, holder, epoch, fleet.ErrFenced)
	}
	return nil
}

// ReadPlan implements fleet.Store.
func (s *Store) ReadPlan(ctx context.Context, pool string) (fleet.Plan, time.Time, error) {
	k, err := poolKeys(pool)
	if err != nil {
		return fleet.Plan{}, time.Time{}, err
	}
	v, err := s.eval(ctx, "read plan", pool, readPlanLua, []string{k.plan, k.lease, k.epoch})
	if err != nil {
		return fleet.Plan{}, time.Time{}, err
	}
	p, now, err := decodeReadPlan(v)
	if err != nil {
		return fleet.Plan{}, now, fmt.Errorf("fleet pool %s: read plan: %w", pool, err)
	}
	return p, now, nil
}

// Released subscribes to the pool's released channel: each lease released
// (Release, a leader's clean stop) sends its epoch, so that a follower
// tries Acquire at once rather than at its next tick. The subscription
// uses a connection of its own (not counted in RoundTrips) and ends, its
// channel closed, with ctx or stop; a broken connection is re-subscribed
// by go-redis.
func (s *Store) Released(ctx context.Context, pool string) (epochs <-chan uint64, stop func(), err error) {
	k, err := poolKeys(pool)
	if err != nil {
		return nil, nil, err
	}
	c, err := s.client()
	if err != nil {
		return nil, nil, fmt.Errorf("fleet pool %s: subscribe: %w", pool, err)
	}
	sub := c.Subscribe(ctx, k.released)
	if _, err := sub.Receive(ctx); err != nil {
		sub.Close()
		return nil, nil, fmt.Errorf("fleet pool %s: subscribe: %w", pool, s.rc.Fail(err))
	}
	out := make(chan uint64, 1)
	done := make(chan struct{})
	go func() {
		defer close(out)
		defer sub.Close()
		msgs := sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case <-done:
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				e, _ := strconv.ParseUint(m.Payload, 10, 64)
				select {
				case out <- e:
				default: // one pending wake-up is enough
				}
			}
		}
	}()
	var once sync.Once
	return out, func() { once.Do(func() { close(done) }) }, nil
}

// Close closes the connection.
func (s *Store) Close() error { return s.rc.Close() }

// IsFenced reports whether err is a plan refused for its epoch.
func IsFenced(err error) bool { return errors.Is(err, fleet.ErrFenced) }

// counter is the hook that counts round trips: one per command, one per
// pipeline (go-redis's retries happen below the hook, so a retried command
// counts once: see the tests' wire counter for the real writes).
type counter struct{ n *atomic.Uint64 }

func (h counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
