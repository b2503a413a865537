// Package pgstore is fleet.Store on PostgreSQL (issue 20: "one leader per
// pool, elected by a lease in the store ... Postgres: a logged table with
// one row per pool (holder, epoch, expires_at), taken and renewed in one
// statement"), for a fleet whose queue lives in PostgreSQL.
//
// Properties, each tested against a real server (pgstore_pg_test.go):
//   - Every method is one statement, so one round trip: pgx runs in
//     QueryExecModeExec (parse, bind and execute in one flight, no named
//     prepared statement) and the pool's ping on acquire is off. Stats
//     counts the statements; the tests check one per call. A follower's
//     tick (Heartbeat, ReadPlan) is 2 statements, the leader's (Heartbeat,
//     Members, WritePlan) 3, plus one Acquire per renewal (about 5 s).
//     First use adds the schema check (ensureSchema: 1 statement, 2 when
//     it creates the tables), and a (re)connect its own round trips
//     (Stats.Connects).
//   - Every time is the server's: now() of the statement, never the host's.
//   - Acquire is one INSERT ... ON CONFLICT DO UPDATE ... WHERE (expired) OR
//     (holder AND epoch match): a non-holder never extends the lease (River
//     #197), and a holder that lost it, even under the same name, cannot
//     renew the new one (Oban #1488). Epochs go up by one at each
//     acquisition, stay on renewal, and never go back: lease rows are never
//     deleted.
//   - WritePlan checks the lease in the same statement, locking its row
//     FOR SHARE so an acquisition waits for the write to land (and then has
//     a higher epoch), and never overwrites a plan of a higher epoch.
//   - No session state: no advisory lock, no prepared statement, no SET;
//     any connection (a recycled one, one through PgBouncer in transaction
//     mode) does. Only Listen needs a session (LISTEN), and it is optional.
//
// Not wired yet (issue 20): the [fleet] setting that names the store (its
// URL keys are config.Conn, as the sources'), the daemon's lease loop, the
// leader's planner, status/explain/metrics. To wire: New(conn, Options{})
// per fleet store, one Store shared by the pools that use it; Close on
// shutdown after Release.
package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgconn/ctxwatch"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Options tune a Store; the zero value is the daemon's.
type Options struct {
	// Schema qualifies the tables; "" uses the connection's search_path.
	Schema string
	// Timeout bounds a call whose context has no deadline (default 5 s).
	// When a call's context ends, the store sends the server a cancel
	// request for the statement, which is what statement_timeout would
	// do, without the SET that PgBouncer's transaction mode would not
	// keep.
	Timeout time.Duration
	// ForgetAfter: Heartbeat deletes the pool's members silent for longer
	// (default 24 h), in the same statement, so that the members table
	// does not grow with every host that ever joined. The planner's "gone"
	// (about 3 heartbeats) is much shorter and is the caller's.
	ForgetAfter time.Duration
	// MaxConns is the pool's size (default 4: a tick's calls may overlap).
	MaxConns int32
	// MaxConnLifetime recycles connections (default pgx's, 1 h); the tests
	// set it short to show that nothing depends on a session.
	MaxConnLifetime time.Duration
	// ApplicationName is shown in pg_stat_activity (default
	// "flexiq-scaled fleet").
	ApplicationName string
}

func (o Options) withDefaults() Options {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.ForgetAfter <= 0 {
		o.ForgetAfter = 24 * time.Hour
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 4
	}
	if o.ApplicationName == "" {
		o.ApplicationName = "flexiq-scaled fleet"
	}
	return o
}

// Stats are a Store's counts since New.
type Stats struct {
	Statements uint64 // statements sent: one round trip each
	Connects   uint64 // connections opened (each a few round trips)
}

// Store is fleet.Store on PostgreSQL. It connects lazily, so New never
// fails for an unreachable server; safe for concurrent use.
type Store struct {
	conn  config.Conn
	opts  Options
	names names
	sql   statements

	statements, connects atomic.Uint64

	mu     sync.Mutex
	pool   *pgxpool.Pool
	schema bool   // the tables are known to be there
	server string // the redacted URL, for messages
}

var _ fleet.Store = (*Store)(nil)

// New returns a store for the server conn names (the same keys as a
// PostgreSQL source's: url, url_file, url_credential, password_file,
// password_credential). Nothing is read or dialled before the first call.
func New(conn config.Conn, opts Options) *Store {
	s := &Store{conn: conn, opts: opts.withDefaults()}
	s.names = newNames(s.opts.Schema)
	s.sql = buildStatements(s.names)
	s.server = config.RedactURLString(conn.URL)
	if s.server == "" {
		s.server = conn.URLOrigin() // the URL is a secret until read
	}
	return s
}

// Stats returns the counts so far.
func (s *Store) Stats() Stats {
	return Stats{Statements: s.statements.Load(), Connects: s.connects.Load()}
}

// get returns the pool, making it if there is none, and the tables if they
// are not known to be there.
func (s *Store) get(ctx context.Context) (*pgxpool.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool == nil {
		p, err := s.newPool()
		if err != nil {
			return nil, err
		}
		s.pool = p
	}
	if !s.schema {
		if err := ensureSchema(ctx, s.pool, s.opts.Schema); err != nil {
			return s.pool, fmt.Errorf("creating the tables: %w", err)
		}
		s.schema = true
	}
	return s.pool, nil
}

func (s *Store) newPool() (*pgxpool.Pool, error) {
	u, err := connURL(s.conn)
	if err != nil {
		return nil, err
	}
	s.server = conn.Redacted(u)
	// TLS verified by default, and the sources' bound on one message: the
	// store's rows are small; a plan's state a few KiB.
	cfg, err := conn.PostgresPoolConfig(u)
	if err != nil {
		// pgx quotes the connection string, password included.
		return nil, errors.New("not a valid PostgreSQL URL")
	}
	// One flight per statement, nothing kept in the session (see the
	// package's doc).
	cfg.ConnConfig.DefaultQueryExecMode = pgx.QueryExecModeExec
	cfg.ConnConfig.StatementCacheCapacity = 0
	cfg.ConnConfig.DescriptionCacheCapacity = 0
	cfg.ConnConfig.Tracer = counter{s}
	// When a call's context ends, ask the server to cancel the statement
	// and keep the connection (pgx's default closes it, sending a cancel
	// request on the way, and the next call pays a reconnect):
	// statement_timeout's effect without a SET, which a pooler in
	// transaction mode would not keep.
	cfg.ConnConfig.BuildContextWatcherHandler = func(pc *pgconn.PgConn) ctxwatch.Handler {
		return &pgconn.CancelRequestContextWatcherHandler{Conn: pc, DeadlineDelay: time.Second}
	}
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		cfg.ConnConfig.RuntimeParams["application_name"] = s.opts.ApplicationName
	}
	// A ping before each use would double the round trips; a dead
	// connection fails its statement instead, pgxpool drops it, and the
	// caller's next tick gets a new one.
	cfg.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	cfg.MaxConns = s.opts.MaxConns
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	if s.opts.MaxConnLifetime > 0 {
		cfg.MaxConnLifetime = s.opts.MaxConnLifetime
		cfg.MaxConnLifetimeJitter = 0
	}
	cfg.AfterConnect = func(context.Context, *pgx.Conn) error { s.connects.Add(1); return nil }
	return pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
}

// reset drops the pool after a connection failure, so that the next call
// reads the URL and password again (a rotated password needs no reload).
func (s *Store) reset(p *pgxpool.Pool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool == p && p != nil {
		s.pool = nil
		s.schema = false
		go p.Close() // waits for connections in use: never block a call on it
	}
}

// Close closes the pool. Release the leases first.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return nil
}

// do runs one call: a deadline if ctx has none, the pool, f, and on
// failure an error naming the store, the server, the operation and the
// pool, with the pool dropped if the connection may be at fault.
func (s *Store) do(ctx context.Context, op, pool string, f func(context.Context, *pgxpool.Pool) error) error {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.Timeout)
		defer cancel()
	}
	p, err := s.get(ctx)
	if err == nil {
		err = f(ctx, p)
	}
	if err == nil || errors.Is(err, fleet.ErrFenced) {
		return err
	}
	if isConnFailure(err) {
		s.reset(p)
	}
	return fmt.Errorf("fleet store %s: %s pool %q: %w", s.server, op, pool, err)
}

// counter counts statements and connects for Stats.
type counter struct{ s *Store }

func (c counter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	c.s.statements.Add(1)
	return ctx
}

func (counter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
