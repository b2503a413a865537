package pgstore

import (
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// statements are the store's SQL, one statement per method, built once
// for the tables' names. Parameters are typed by casts, since pgx sends
// them as text with no type (QueryExecModeExec).
type statements struct {
	acquire, release, heartbeat, members, writePlan, readPlan string
}

func buildStatements(n names) statements {
	return statements{
		acquire:   acquireSQL(n),
		release:   releaseSQL(n),
		heartbeat: heartbeatSQL(n),
		members:   membersSQL(n),
		writePlan: writePlanSQL(n),
		readPlan:  readPlanSQL(n),
	}
}

// acquireSQL takes, renews or takes over a pool's lease.
//
// $1 pool, $2 holder, $3 epoch the caller holds or knows (0: none), $4 ttl
// in ms. The WHERE of DO UPDATE is the whole rule: the row is expired (or
// released), or holder AND epoch match, or the row is garbage (issue 27: an
// epoch outside 1 to 2^53, or an expiry beyond ten ttls and a minute, as in
// the Redis store), which is taken over rather than obeyed. A renewal keeps
// the epoch; anything else is an acquisition, above the row's epoch (as it
// stands when locked), the caller's and the stored plan's, those that are
// epochs (so that a lost row, or a lost table, starts again above what the
// fleet knows), back to 1 past 2^53. When DO UPDATE does not happen, the
// second SELECT returns the lease as it stands (in the statement's
// snapshot), held = false.
func acquireSQL(n names) string {
	return fmt.Sprintf(`WITH known AS (
  SELECT GREATEST(
    CASE WHEN $3::bigint BETWEEN 1 AND %[3]d THEN $3::bigint ELSE 0 END,
    COALESCE((SELECT epoch FROM %[2]s WHERE pool = $1::text AND epoch BETWEEN 1 AND %[3]d), 0)) AS e),
won AS (
  INSERT INTO %[1]s AS l (pool, holder, epoch, expires_at)
  SELECT $1::text, $2::text, CASE WHEN e >= %[3]d THEN 1 ELSE e + 1 END, now() + $4::bigint * interval '1 millisecond' FROM known
  ON CONFLICT (pool) DO UPDATE
    SET holder = excluded.holder,
        epoch = CASE
          WHEN l.holder = excluded.holder AND l.epoch = $3::bigint AND l.epoch BETWEEN 1 AND %[3]d THEN l.epoch
          WHEN GREATEST(CASE WHEN l.epoch BETWEEN 1 AND %[3]d THEN l.epoch ELSE 0 END, (SELECT e FROM known)) >= %[3]d THEN 1
          ELSE GREATEST(CASE WHEN l.epoch BETWEEN 1 AND %[3]d THEN l.epoch ELSE 0 END, (SELECT e FROM known)) + 1 END,
        expires_at = excluded.expires_at
    WHERE l.expires_at <= now() OR (l.holder = excluded.holder AND l.epoch = $3::bigint)
      OR NOT (l.epoch BETWEEN 1 AND %[3]d) OR l.expires_at > now() + (10 * $4::bigint + 60000) * interval '1 millisecond'
  RETURNING holder, epoch, expires_at)
SELECT holder, epoch, expires_at, true FROM won
UNION ALL
SELECT holder, epoch, expires_at, false FROM %[1]s WHERE pool = $1::text AND NOT EXISTS (SELECT FROM won)`, n.lease, n.plan, fleet.MaxEpoch)
}

// releaseSQL gives a lease up.
//
// $1 pool, $2 holder, $3 epoch. The row stays (its epoch must never go
// back); it is emptied and expired, and the followers LISTENing on the
// pool's channel hear it when this commits.
func releaseSQL(n names) string {
	return fmt.Sprintf(`WITH gone AS (
  UPDATE %s SET holder = '', expires_at = now()
  WHERE pool = $1::text AND holder = $2::text AND epoch = $3::bigint
  RETURNING pool)
SELECT pg_notify($4::text, pool) FROM gone`, n.lease)
}

// heartbeatSQL records a host's heartbeat and forgets hosts long silent.
//
// $1 pool, $2 host, $3 capacity, $4 live, $5 starting, $6 draining, $7
// version, $8 forget after (ms).
func heartbeatSQL(n names) string {
	return fmt.Sprintf(`WITH forgotten AS (
  DELETE FROM %[1]s WHERE pool = $1::text AND host <> $2::text AND seen_at < now() - $8::bigint * interval '1 millisecond')
INSERT INTO %[1]s (pool, host, capacity, live, starting, draining, version, seen_at)
VALUES ($1::text, $2::text, $3::integer, $4::integer, $5::integer, $6::integer, $7::text, now())
ON CONFLICT (pool, host) DO UPDATE
  SET capacity = excluded.capacity, live = excluded.live, starting = excluded.starting,
      draining = excluded.draining, version = excluded.version, seen_at = excluded.seen_at`, n.member)
}

// membersSQL reads the pool's members, with the store's clock.
//
// $1 pool. The LEFT JOIN returns now() even without members.
func membersSQL(n names) string {
	return fmt.Sprintf(`SELECT c.now, m.host, m.capacity, m.live, m.starting, m.draining, m.version, m.seen_at
FROM (SELECT now() AS now) c LEFT JOIN %s m ON m.pool = $1::text
ORDER BY m.host`, n.member)
}

// writePlanSQL writes the leader's plan, fenced by its lease.
//
// $1 pool, $2 holder, $3 epoch, $4 target, $5 shares (JSON), $6 state (hex:
// text parameters carry any bytes). The lease is checked, and its row
// locked FOR SHARE, in the statement that writes: an acquisition by another
// host waits for this to commit, or this sees its new epoch and writes
// nothing. Whatever plan is stored is overwritten: under the live lease of
// this epoch, a plan of a later one is no leader's (a later lease would
// have a later epoch), it is a hostile or corrupt write. No row returned:
// fenced.
func writePlanSQL(n names) string {
	return fmt.Sprintf(`WITH lease AS (
  SELECT FROM %[1]s
  WHERE pool = $1::text AND holder = $2::text AND epoch = $3::bigint AND expires_at > now()
  FOR SHARE)
INSERT INTO %[2]s AS p (pool, epoch, target, shares, state, written_at)
SELECT $1::text, $3::bigint, $4::integer, $5::jsonb, decode($6::text, 'hex'), now() FROM lease
ON CONFLICT (pool) DO UPDATE
  SET epoch = excluded.epoch, target = excluded.target, shares = excluded.shares,
      state = excluded.state, written_at = excluded.written_at
RETURNING written_at`, n.lease, n.plan)
}

// readPlanSQL reads the plan, and the lease's epoch that bounds it.
//
// $1 pool. The LEFT JOINs return now() even without a plan; the lease's
// epoch (the row keeps it on release) bounds the plan's.
func readPlanSQL(n names) string {
	return fmt.Sprintf(`SELECT c.now, p.epoch, p.target, p.shares::text, encode(p.state, 'hex'), p.written_at, l.epoch
FROM (SELECT now() AS now) c LEFT JOIN %s p ON p.pool = $1::text LEFT JOIN %s l ON l.pool = $1::text`, n.plan, n.lease)
}
