package pgstore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The tables, created if missing by ensureSchema (at a Store's first call,
// and again after a reconnect), in Options.Schema or the connection's search_path:
//
//	flexiq_fleet_lease   one row per pool: holder, epoch, expires_at. LOGGED
//	                     (the default), so an epoch survives a crash and a
//	                     restart and never goes back. A row is never deleted:
//	                     Release empties holder and expires it, keeping the
//	                     epoch.
//	flexiq_fleet_member  one row per pool and host: the heartbeat, seen_at
//	                     on the server's clock.
//	flexiq_fleet_plan    one row per pool: the last plan, with the epoch it
//	                     was written under.
//
// An operator who does not want the daemon's role to create tables runs
// SchemaSQL's output once (psql -f), and grants the role SELECT, INSERT,
// UPDATE, DELETE on the three tables.
const (
	leaseTable  = "flexiq_fleet_lease"
	memberTable = "flexiq_fleet_member"
	planTable   = "flexiq_fleet_plan"
)

// names are the tables' names as SQL, qualified by the schema if one is set.
type names struct{ lease, member, plan string }

func newNames(schema string) names {
	q := func(table string) string {
		if schema == "" {
			return pgx.Identifier{table}.Sanitize()
		}
		return pgx.Identifier{schema, table}.Sanitize()
	}
	return names{lease: q(leaseTable), member: q(memberTable), plan: q(planTable)}
}

// SchemaSQL is the DDL that ensureSchema runs, for an operator who lays the
// tables down by hand. Every statement is idempotent (IF NOT EXISTS).
func SchemaSQL(schema string) string {
	n := newNames(schema)
	var b strings.Builder
	if schema != "" {
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", pgx.Identifier{schema}.Sanitize())
	}
	fmt.Fprintf(&b, `CREATE TABLE IF NOT EXISTS %s (
  pool       text PRIMARY KEY,
  holder     text NOT NULL DEFAULT '',
  epoch      bigint NOT NULL CHECK (epoch >= 0),
  expires_at timestamptz NOT NULL
);
CREATE TABLE IF NOT EXISTS %s (
  pool     text NOT NULL,
  host     text NOT NULL,
  capacity integer NOT NULL,
  live     integer NOT NULL,
  starting integer NOT NULL,
  draining integer NOT NULL,
  version  text NOT NULL,
  seen_at  timestamptz NOT NULL,
  PRIMARY KEY (pool, host)
);
CREATE TABLE IF NOT EXISTS %s (
  pool       text PRIMARY KEY,
  epoch      bigint NOT NULL,
  target     integer NOT NULL,
  shares     jsonb NOT NULL,
  state      bytea,
  written_at timestamptz NOT NULL
);
`, n.lease, n.member, n.plan)
	return b.String()
}

// existsSQL tells whether the three tables are there, so that a role
// without CREATE on the schema works with tables laid down by hand.
func existsSQL(schema string) string {
	n := newNames(schema)
	return fmt.Sprintf("SELECT to_regclass('%s') IS NOT NULL AND to_regclass('%s') IS NOT NULL AND to_regclass('%s') IS NOT NULL",
		strings.ReplaceAll(n.lease, "'", "''"), strings.ReplaceAll(n.member, "'", "''"), strings.ReplaceAll(n.plan, "'", "''"))
}

// ensureSchema creates the tables if any is missing. Hosts starting
// together may race on CREATE TABLE IF NOT EXISTS (which is not atomic
// against a concurrent creator: a unique violation on the catalog): the
// loser tries again once, and then finds the tables there.
func ensureSchema(ctx context.Context, q querier, schema string) error {
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var ok bool
		if err = q.QueryRow(ctx, existsSQL(schema)).Scan(&ok); err != nil || ok {
			return err
		}
		// Several statements: the simple protocol runs them as one
		// implicit transaction.
		_, err = q.Exec(ctx, SchemaSQL(schema), pgx.QueryExecModeSimpleProtocol)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || (pgErr.Code != "23505" && pgErr.Code != "42P07") {
			return err
		}
	}
	return err
}

// querier is what the store needs of a pool (pgxpool.Pool has it).
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Channel is the channel Release notifies on for pool, with the pool's
// name as the payload: "flexiq_fleet_" and the pool's name, or a digest of
// it when that would be longer than PostgreSQL's 63 bytes. A follower that
// wants to try at once LISTENs on it (quoted: pgx.Identifier{Channel(pool)}.
// Sanitize()) on a connection of its own (see Listen); behind PgBouncer in
// transaction mode LISTEN does not work, and followers try at their next
// renewal instead.
func Channel(pool string) string {
	const prefix = "flexiq_fleet_"
	if len(prefix)+len(pool) <= 63 {
		return prefix + pool
	}
	sum := sha256.Sum256([]byte(pool))
	return prefix + hex.EncodeToString(sum[:16])
}
