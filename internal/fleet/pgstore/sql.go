package pgstore

import "fmt"

// statements are the store's SQL, one statement per method, built once
// for the tables' names. Parameters are typed by casts, since pgx sends
// them as text with no type (QueryExecModeExec).
type statements struct {
	acquire, release, heartbeat, members, writePlan, readPlan string
}

func buildStatements(n names) statements {
	return statements{
		// $1 pool, $2 holder, $3 epoch the caller holds (0: none), $4 ttl
		// in ms. The WHERE of DO UPDATE is the whole rule: the row is
		// expired (or released), or holder AND epoch match. A renewal keeps
		// the epoch; anything else is an acquisition, epoch + 1. The first
		// row of the pool has epoch 1. When DO UPDATE does not happen, the
		// second SELECT returns the lease as it stands (in the statement's
		// snapshot), held = false.
		acquire: fmt.Sprintf(`WITH won AS (
  INSERT INTO %[1]s AS l (pool, holder, epoch, expires_at)
  VALUES ($1::text, $2::text, 1, now() + $4::bigint * interval '1 millisecond')
  ON CONFLICT (pool) DO UPDATE
    SET holder = excluded.holder,
        epoch = CASE WHEN l.holder = excluded.holder AND l.epoch = $3::bigint THEN l.epoch ELSE l.epoch + 1 END,
        expires_at = excluded.expires_at
    WHERE l.expires_at <= now() OR (l.holder = excluded.holder AND l.epoch = $3::bigint)
  RETURNING holder, epoch, expires_at)
SELECT holder, epoch, expires_at, true FROM won
UNION ALL
SELECT holder, epoch, expires_at, false FROM %[1]s WHERE pool = $1::text AND NOT EXISTS (SELECT FROM won)`, n.lease),

		// $1 pool, $2 holder, $3 epoch. The row stays (its epoch must
		// never go back); it is emptied and expired, and the followers
		// LISTENing on the pool's channel hear it when this commits.
		release: fmt.Sprintf(`WITH gone AS (
  UPDATE %s SET holder = '', expires_at = now()
  WHERE pool = $1::text AND holder = $2::text AND epoch = $3::bigint
  RETURNING pool)
SELECT pg_notify($4::text, pool) FROM gone`, n.lease),

		// $1 pool, $2 host, $3 capacity, $4 live, $5 starting, $6
		// draining, $7 version, $8 forget after (ms).
		heartbeat: fmt.Sprintf(`WITH forgotten AS (
  DELETE FROM %[1]s WHERE pool = $1::text AND host <> $2::text AND seen_at < now() - $8::bigint * interval '1 millisecond')
INSERT INTO %[1]s (pool, host, capacity, live, starting, draining, version, seen_at)
VALUES ($1::text, $2::text, $3::integer, $4::integer, $5::integer, $6::integer, $7::text, now())
ON CONFLICT (pool, host) DO UPDATE
  SET capacity = excluded.capacity, live = excluded.live, starting = excluded.starting,
      draining = excluded.draining, version = excluded.version, seen_at = excluded.seen_at`, n.member),

		// $1 pool. The LEFT JOIN returns now() even without members.
		members: fmt.Sprintf(`SELECT c.now, m.host, m.capacity, m.live, m.starting, m.draining, m.version, m.seen_at
FROM (SELECT now() AS now) c LEFT JOIN %s m ON m.pool = $1::text
ORDER BY m.host`, n.member),

		// $1 pool, $2 holder, $3 epoch, $4 target, $5 shares (JSON), $6
		// state (hex: text parameters carry any bytes). The lease is checked, and its row locked FOR SHARE, in
		// the statement that writes: an acquisition by another host waits
		// for this to commit, or this sees its new epoch and writes
		// nothing. A plan of a higher epoch is never overwritten. No row
		// returned: fenced.
		writePlan: fmt.Sprintf(`WITH lease AS (
  SELECT FROM %[1]s
  WHERE pool = $1::text AND holder = $2::text AND epoch = $3::bigint AND expires_at > now()
  FOR SHARE)
INSERT INTO %[2]s AS p (pool, epoch, target, shares, state, written_at)
SELECT $1::text, $3::bigint, $4::integer, $5::jsonb, decode($6::text, 'hex'), now() FROM lease
ON CONFLICT (pool) DO UPDATE
  SET epoch = excluded.epoch, target = excluded.target, shares = excluded.shares,
      state = excluded.state, written_at = excluded.written_at
  WHERE p.epoch <= excluded.epoch
RETURNING written_at`, n.lease, n.plan),

		// $1 pool. The LEFT JOIN returns now() even without a plan.
		readPlan: fmt.Sprintf(`SELECT c.now, p.epoch, p.target, p.shares::text, encode(p.state, 'hex'), p.written_at
FROM (SELECT now() AS now) c LEFT JOIN %s p ON p.pool = $1::text`, n.plan),
	}
}
