package source

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
)

// The PostgreSQL family: postgres-query (postgres_query.go) and one preset
// per queue system (river.go, pgboss.go, graphile_worker.go, oban.go,
// good_job.go, solid_queue.go). All of them read one row with the columns
// pending, running and optionally oldest_age_sec and paused, through pgDB.

// pgDefaultTimeout bounds a read when the caller's context has no deadline
// (the daemon always gives one: the tick's bound).
const pgDefaultTimeout = 10 * time.Second

// pgDB is a pooled connection to one server, for one source. The pool is
// made on first use and dropped after a failure to connect, so that the next
// read re-reads the URL and password (a rotated password needs no reload)
// and starts afresh; pgxpool itself replaces broken connections.
type pgDB struct {
	typ  string
	conn config.Conn
	// rearm tells the LISTEN watcher that the server answers again.
	rearm *rearm

	mu     sync.Mutex
	pool   *pgxpool.Pool
	server string // the redacted URL, for messages
}

// postgresSchemes are the URL schemes libpq (and pgx) accept.
var postgresSchemes = []string{"postgres", "postgresql"}

func newPgDB(typ string, conn config.Conn) *pgDB {
	d := &pgDB{typ: typ, conn: conn, rearm: newRearm()}
	if conn.URL != "" {
		d.server = config.RedactURLString(conn.URL)
	}
	if d.server == "" {
		d.server = conn.URLOrigin() // the URL is a secret until read
	}
	return d
}

// get returns the pool, making it if there is none.
func (d *pgDB) get() (*pgxpool.Pool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil {
		return d.pool, nil
	}
	u, err := conn.URL(d.conn)
	if err != nil {
		return nil, fmt.Errorf("%s source %s: %w", d.typ, d.server, err)
	}
	d.server = conn.Redacted(u)
	cfg, err := conn.PostgresPoolConfig(u)
	if err != nil {
		// pgx quotes the connection string, password included.
		return nil, fmt.Errorf("%s source %s: not a valid PostgreSQL URL", d.typ, d.server)
	}
	// One read at a time per pool; a second connection covers a read
	// overlapping a dying one.
	cfg.MaxConns = 2
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.HealthCheckPeriod = 30 * time.Second
	if cfg.ConnConfig.RuntimeParams == nil {
		cfg.ConnConfig.RuntimeParams = map[string]string{}
	}
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		cfg.ConnConfig.RuntimeParams["application_name"] = "flexiq-scaled"
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		return nil, fmt.Errorf("%s source %s: %w", d.typ, d.server, err)
	}
	d.pool = pool
	return pool, nil
}

// reset drops the pool after a connection failure.
func (d *pgDB) reset(p *pgxpool.Pool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool == p {
		d.pool = nil
		// Close waits for connections in use; never block a tick on it.
		goGuarded(context.Background(), d.typ, "closing a connection pool", p.Close)
	}
}

func (d *pgDB) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pool != nil {
		d.pool.Close()
		d.pool = nil
	}
	return nil
}

// read runs sql with args in a READ ONLY transaction whose statement_timeout
// is the time left before ctx's deadline, and returns its one row as Counts.
// Every failure names the source type, the server and what failed.
func (d *pgDB) read(ctx context.Context, sql string, args ...any) (Counts, error) {
	if _, has := ctx.Deadline(); !has {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, pgDefaultTimeout)
		defer cancel()
	}
	pool, err := d.get()
	if err != nil {
		d.rearm.failed()
		return Counts{}, err
	}
	c, stage, err := d.readTx(ctx, pool, sql, args...)
	if err != nil {
		d.rearm.failed()
		if isConnFailure(err) {
			d.reset(pool)
		}
		return Counts{}, fmt.Errorf("%s source %s: %s", d.typ, d.server, describePgError(ctx, stage, err))
	}
	d.rearm.ok()
	return c, nil
}

func (d *pgDB) readTx(ctx context.Context, pool *pgxpool.Pool, sql string, args ...any) (Counts, string, error) {
	tx, err := pool.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return Counts{}, "connect", err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // read only: nothing to keep
	// The server gives up on its own too: a statement cut off by our
	// context alone would go on running there.
	left := time.Until(deadline(ctx))
	ms := max(left.Milliseconds(), 100)
	if _, err := tx.Exec(ctx, fmt.Sprintf("SET LOCAL statement_timeout = %d", ms)); err != nil {
		return Counts{}, "set statement_timeout", err
	}
	// Oban, good_job and Solid Queue store UTC wall-clock times in
	// timestamp columns without a zone; with the session in UTC, comparing
	// them with now() means what their systems mean by it.
	if _, err := tx.Exec(ctx, "SET LOCAL TimeZone = 'UTC'"); err != nil {
		return Counts{}, "set TimeZone", err
	}
	rows, err := tx.Query(ctx, sql, args...)
	if err != nil {
		return Counts{}, "query", err
	}
	c, err := countsRow(rows)
	if err != nil {
		return Counts{}, "query", err
	}
	return c, "", nil
}

func deadline(ctx context.Context) time.Time {
	dl, _ := ctx.Deadline()
	return dl
}

// isConnFailure tells a failure that may be the connection's (which a new
// pool may not have) from a query error (which it would have too).
func isConnFailure(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions, 28 authorization, 57P
		// an operator intervention (the server shutting down).
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "57P")
	}
	return true // not the server's answer: network, TLS, timeout
}

// describePgError says what failed in words an operator can act on.
func describePgError(ctx context.Context, stage string, err error) string {
	var pgErr *pgconn.PgError
	var connErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28"):
		return fmt.Sprintf("authentication failed: %s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	case errors.As(err, &pgErr) && pgErr.Code == "57014":
		return fmt.Sprintf("%s timed out (statement_timeout): %s", stage, pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "3D000":
		return fmt.Sprintf("database does not exist: %s", pgErr.Message)
	case errors.As(err, &pgErr) && pgErr.Code == "42P01":
		return fmt.Sprintf("%s failed: %s (is the queue system's schema installed, and is schema right?) (SQLSTATE %s)", stage, pgErr.Message, pgErr.Code)
	case errors.As(err, &pgErr):
		return fmt.Sprintf("%s failed: %s (SQLSTATE %s)", stage, pgErr.Message, pgErr.Code)
	case ctx.Err() != nil:
		return fmt.Sprintf("%s timed out: %v", stage, err)
	case (errors.As(err, &connErr) || stage == "connect") && strings.Contains(err.Error(), "server refused TLS"):
		// A remote server is verified by default (sslmode=verify-full),
		// where libpq's own default would have gone on in clear.
		return fmt.Sprintf("cannot connect: %v (the server offers no TLS, and a remote server's certificate is verified by default: "+
			"enable TLS on the server, or write sslmode=disable in the URL if the network between them is trusted)", err)
	case errors.As(err, &connErr) || stage == "connect":
		return fmt.Sprintf("cannot connect: %v", err)
	case errors.As(err, &netErr):
		return fmt.Sprintf("%s failed (connection lost): %v", stage, err)
	}
	return fmt.Sprintf("%s failed: %v", stage, err)
}

// The columns a PostgreSQL source's query returns, by name.
const (
	colPending = "pending"
	colRunning = "running"
	colPaused  = "paused"
	colOldest  = "oldest_age_sec"
)

// countsRow reads exactly one row with the columns pending and running,
// and optionally paused and oldest_age_sec (NULL when nothing is pending),
// in any order. Columns are read by name so that a query written for
// another purpose fails loudly rather than being misread.
func countsRow(rows pgx.Rows) (Counts, error) {
	defer rows.Close()
	fields := rows.FieldDescriptions()
	idx := map[string]int{}
	for i, f := range fields {
		name := strings.ToLower(f.Name)
		switch name {
		case colPending, colRunning, colPaused, colOldest:
		default:
			return Counts{}, fmt.Errorf("query returned a column %q: want only pending, running, paused, oldest_age_sec", f.Name)
		}
		if _, dup := idx[name]; dup {
			return Counts{}, fmt.Errorf("query returned the column %q twice", name)
		}
		idx[name] = i
	}
	for _, need := range []string{colPending, colRunning} {
		if _, ok := idx[need]; !ok {
			return Counts{}, fmt.Errorf("query returned no column %q (want pending, running [, paused] [, oldest_age_sec]; name them with AS)", need)
		}
	}
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return Counts{}, err
		}
		return Counts{}, errors.New("query returned no rows, want one")
	}
	vals, err := rows.Values()
	if err != nil {
		return Counts{}, err
	}
	if rows.Next() {
		return Counts{}, errors.New("query returned more than one row, want one")
	}
	if err := rows.Err(); err != nil {
		return Counts{}, err
	}
	var c Counts
	for name, dst := range map[string]*int64{colPending: &c.Pending, colRunning: &c.Running, colPaused: &c.Paused} {
		i, ok := idx[name]
		if !ok {
			continue
		}
		if *dst, err = pgCount(name, vals[i]); err != nil {
			return Counts{}, err
		}
	}
	if i, ok := idx[colOldest]; ok && vals[i] != nil {
		secs, err := pgNumber(colOldest, vals[i])
		if err != nil {
			return Counts{}, err
		}
		if c.Pending > 0 {
			// A clock skew between the writer and the server can make
			// a just-due job look a little in the future.
			c.OldestAge, c.HasOldest = time.Duration(max(secs, 0)*float64(time.Second)), true
		}
	}
	return c, nil
}

// pgCount accepts a non-negative whole number of any numeric type.
func pgCount(name string, v any) (int64, error) {
	if v == nil {
		return 0, fmt.Errorf("%s is NULL, want an integer (sum() of no rows is NULL; use count() or coalesce)", name)
	}
	f, err := pgNumber(name, v)
	if err != nil {
		return 0, err
	}
	switch {
	case f != math.Trunc(f):
		return 0, fmt.Errorf("%s is %v, want a whole number", name, f)
	case f < 0:
		return 0, fmt.Errorf("%s is %v, want >= 0", name, f)
	case f >= math.MaxInt64:
		return 0, fmt.Errorf("%s is %v, too large", name, f)
	}
	return int64(f), nil
}

// pgNumber converts what pgx decodes a numeric column to.
func pgNumber(name string, v any) (float64, error) {
	switch v := v.(type) {
	case int16:
		return float64(v), nil
	case int32:
		return float64(v), nil
	case int64:
		return float64(v), nil
	case float32:
		return float64(v), nil
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("%s is %v, want a number", name, v)
		}
		return v, nil
	case pgtype.Numeric:
		f, err := v.Float64Value()
		if err != nil || !f.Valid {
			return 0, fmt.Errorf("%s is not a finite number", name)
		}
		return pgNumber(name, f.Float64)
	case string:
		return 0, fmt.Errorf("%s is text %q, want a number", name, v)
	}
	return 0, fmt.Errorf("%s is %T, want a number", name, v)
}

// listen implements Watcher for the presets whose system notifies its
// inserts: a connection of its own LISTENs on channel and wakes the pool on
// every notification. It reconnects after a failure (watchLoop: 1 s
// doubling to 30 s, at once when the source's reads succeed again after
// failing), and wakes the pool on each (re)connection, since anything may
// have arrived while it was not listening; polling covers the gap.
func (d *pgDB) listen(ctx context.Context, channel string, wake func()) (string, error) {
	how := func() string { return fmt.Sprintf("LISTEN %q on %s", channel, d.serverName()) }
	goGuarded(ctx, d.typ, "the wake-up's goroutine", func() {
		watchLoop(ctx, d.typ, d.rearm, false, how, func(ctx context.Context, active func()) error {
			return d.listenOnce(ctx, channel, wake, active)
		})
	})
	return how(), nil
}

func (d *pgDB) serverName() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.server
}

// listenOnce listens until the connection fails or ctx ends, calls active
// once it listens, and returns why it ended.
func (d *pgDB) listenOnce(ctx context.Context, channel string, wake, active func()) error {
	u, err := conn.URL(d.conn)
	if err != nil {
		return fmt.Errorf("%s source %s: %w", d.typ, d.serverName(), err)
	}
	cfg, err := conn.PostgresConfig(u)
	if err != nil {
		return fmt.Errorf("%s source %s: not a valid PostgreSQL URL", d.typ, d.serverName())
	}
	cctx, cancel := context.WithTimeout(ctx, pgDefaultTimeout)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	cancel()
	if err != nil {
		return fmt.Errorf("%s source %s: LISTEN: %s", d.typ, d.serverName(), describePgError(ctx, "connect", err))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel}.Sanitize()); err != nil {
		return fmt.Errorf("%s source %s: LISTEN: %s", d.typ, d.serverName(), describePgError(ctx, "LISTEN", err))
	}
	active()
	wake()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("%s source %s: LISTEN: %s", d.typ, d.serverName(), describePgError(ctx, "wait", err))
		}
		wake()
	}
}
