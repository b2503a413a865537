package source

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
)

// TypeFlexiqPostgres reads flexiq's Postgres storage.
const TypeFlexiqPostgres = "flexiq-postgres"

// DefaultFlexiqSchema is flexiq's own: PostgresStorage::new uses schema
// "flexiq" (storage/postgres/mod.rs).
const DefaultFlexiqSchema = "flexiq"

// FlexiqPostgresSettings are a flexiq-postgres source's keys.
type FlexiqPostgresSettings struct {
	Queues    []string `toml:"queues,omitempty"`    // a filter; nil = all queues
	Namespace string   `toml:"namespace,omitempty"` // a filter; "" = none
	Schema    string   `toml:"schema,omitempty"`
	config.Conn
}

func init() {
	define(config.SourceType{
		Name: TypeFlexiqPostgres,
		Doc: "Reads flexiq's PostgreSQL storage, as flexiq's Rust core lays it out in its schema: pending, running " +
			"and paused jobs (queue_state) as flexiq-sqlite does. The URL is postgres:// or postgresql://.",
		Keys: append(slices.Clone(config.ConnKeys), queuesKey, namespaceKey,
			config.KeyDoc{Name: "schema", Type: "string", Default: `"flexiq"`, Limits: "letters, digits and underscores",
				Doc: "The schema flexiq's PostgreSQL storage was given, if not its default."}),
	}, ReportsThreads, decodeFlexiqPostgres, func(s FlexiqPostgresSettings) (Source, error) { return newFlexiqPostgres(s) })
}

// flexiqSchemaRE is what flexiq's validate_schema_name accepts
// (storage/postgres/mod.rs): ASCII letters, digits and underscores.
var flexiqSchemaRE = regexp.MustCompile(`^[A-Za-z0-9_]+$`)

func decodeFlexiqPostgres(d *config.SourceDecoder) FlexiqPostgresSettings {
	var s FlexiqPostgresSettings
	d.Queues(&s.Queues)
	d.String("namespace", &s.Namespace)
	d.Conn(&s.Conn, "postgres", "postgresql")
	s.Schema = DefaultFlexiqSchema
	if d.String("schema", &s.Schema) && !flexiqSchemaRE.MatchString(s.Schema) {
		d.Errorf("schema", "%q: flexiq takes only letters, digits and underscores", s.Schema)
	}
	return s
}

// flexiqPostgres reads flexiq's Postgres storage, as flexiq's Rust core
// lays it out (crates/flexiq-core/src/storage/schema.rs, postgres/mod.rs,
// diesel_common/queue_state.rs and diesel_common/workers.rs): the jobs
// table with the same integer statuses as SQLite (0 pending, 1 running) and
// Unix-millisecond scheduled_at, queue_state (queue_name, namespace, paused
// boolean) and workers, all in one schema, "flexiq" unless configured.
type flexiqPostgres struct {
	spec   FlexiqPostgresSettings
	schema string // quoted identifier
	// The count statements, by the queue_state layout they fit: the
	// current one (pauses by namespace, flexiq's m0020), one without a
	// namespace column (before m0020: a pause holds the queue in every
	// namespace), and one without a queue_state table (no pauses).
	counts [3]string
	// layout is which of counts fits, learnt from a failure, and layoutAt
	// when: an older layout is retried from the current one after
	// relearnLayout, so that a flexiq upgrade that migrates the database
	// under a running daemon is seen.
	layout   int
	layoutAt time.Time
	filter   []any

	mu   sync.Mutex
	pool *pgxpool.Pool
	srv  string // the server, redacted, for messages
}

// relearnLayout is how long an older queue_state layout is trusted.
const relearnLayout = time.Minute

const (
	pgPausesByNamespace = iota
	pgPausesByQueue
	pgNoPauses
)

func newFlexiqPostgres(spec FlexiqPostgresSettings) (*flexiqPostgres, error) {
	schema := spec.Schema
	if schema == "" {
		schema = DefaultFlexiqSchema
	}
	s := &flexiqPostgres{spec: spec, schema: pgx.Identifier{schema}.Sanitize()}
	where, filter := pgJobFilter(spec.Queues, spec.Namespace, 2)
	s.filter = filter
	for layout := range s.counts {
		s.counts[layout] = pgFlexiqCounts(s.schema, where, layout)
	}
	return s, nil
}

// pgJobFilter is flexiqdb.JobFilter in Postgres's $n parameters: the
// queues (any of them; none = every queue) and the namespace ("" = any).
func pgJobFilter(queues []string, namespace string, first int) (string, []any) {
	var b strings.Builder
	var args []any
	if len(queues) > 0 {
		args = append(args, queues)
		fmt.Fprintf(&b, " AND queue = ANY($%d::text[])", first)
		first++
	}
	if namespace != "" {
		args = append(args, namespace)
		fmt.Fprintf(&b, " AND namespace = $%d", first)
	}
	return b.String(), args
}

// pgFlexiqCounts is the one statement an observation runs: pending (due,
// not paused), running, the oldest pending job's scheduled_at, and paused
// (due jobs of a paused queue). A future-scheduled job (scheduled_at > $1)
// is never pending, as flexiq's dequeue takes only scheduled_at <= now.
// The paused rule is flexiq's own, as flexiq-sqlite applies it
// (flexiqdb.PausedCond): a queue_state row with paused set holds its queue
// in its namespace, NULL being the default namespace, matched with IS NOT
// DISTINCT FROM; before m0020 a row held the queue in every namespace.
func pgFlexiqCounts(schema, where string, layout int) string {
	paused := `false`
	switch layout {
	case pgPausesByNamespace:
		paused = `EXISTS (SELECT 1 FROM ` + schema + `.queue_state AS qs
			WHERE qs.paused AND qs.queue_name = j.queue AND qs.namespace IS NOT DISTINCT FROM j.namespace)`
	case pgPausesByQueue:
		paused = `EXISTS (SELECT 1 FROM ` + schema + `.queue_state AS qs WHERE qs.paused AND qs.queue_name = j.queue)`
	}
	return `SELECT
	count(*) FILTER (WHERE status = 0 AND NOT held),
	count(*) FILTER (WHERE status = 1),
	min(scheduled_at) FILTER (WHERE status = 0 AND NOT held),
	count(*) FILTER (WHERE status = 0 AND held)
FROM (
	SELECT j.status, j.scheduled_at, (j.status = 0 AND ` + paused + `) AS held
	FROM ` + schema + `.jobs AS j
	WHERE (j.status = 1 OR (j.status = 0 AND j.scheduled_at <= $1))` + where + `
) AS j`
}

// connect returns the pool, making it on first use. pgxpool re-establishes
// its connections after a failure by itself; the URL and password are
// re-read at every new connection (BeforeConnect), so a rotated password
// needs no reload. Every session is read-only.
func (s *flexiqPostgres) connect() (*pgxpool.Pool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		return s.pool, nil
	}
	u, err := conn.URL(s.spec.Conn)
	if err != nil {
		return nil, fmt.Errorf("%s source: %w", TypeFlexiqPostgres, err)
	}
	s.srv = conn.Redacted(u)
	cfg, err := conn.PostgresPoolConfig(u)
	if err != nil {
		return nil, fmt.Errorf("%s source %s: bad URL: %v", TypeFlexiqPostgres, s.srv, conn.PostgresParseError(err))
	}
	cfg.MaxConns = 2
	cfg.MinConns = 0
	cfg.MaxConnIdleTime = 5 * time.Minute
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	cfg.ConnConfig.RuntimeParams["default_transaction_read_only"] = "on"
	cfg.ConnConfig.RuntimeParams["application_name"] = "flexiq-scaled"
	cfg.BeforeConnect = func(ctx context.Context, cc *pgx.ConnConfig) error {
		u, err := conn.URL(s.spec.Conn)
		if err != nil {
			return err
		}
		if p, ok := u.User.Password(); ok {
			cc.Password = p
		}
		return nil
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		return nil, fmt.Errorf("%s source %s: %v", TypeFlexiqPostgres, s.srv, err)
	}
	s.pool = pool
	return pool, nil
}

// redactErr strips a connection string from an error message.
func redactErr(err error, secret string) string {
	return strings.ReplaceAll(err.Error(), secret, "(the URL)")
}

func (s *flexiqPostgres) fail(what string, err error) error {
	return fmt.Errorf("%s source %s: %s: %s", TypeFlexiqPostgres, s.srv, what, describePgErr(err))
}

// describePgErr says what failed in words an operator greps for.
func describePgErr(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "28P01", "28000":
			return "authentication failed: " + pe.Message
		case "3D000":
			return "no such database: " + pe.Message
		case "42P01", "3F000":
			return "flexiq's tables are not there (wrong schema, or flexiq never migrated this database): " + pe.Message
		}
		return fmt.Sprintf("query failed: %s (SQLSTATE %s)", pe.Message, pe.Code)
	}
	msg := err.Error()
	if strings.Contains(msg, "password authentication failed") || strings.Contains(msg, "SASL") {
		return "authentication failed: " + msg
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timed out: " + msg
	}
	return msg
}

func (s *flexiqPostgres) Observe(ctx context.Context, now time.Time) (Counts, error) {
	pool, err := s.connect()
	if err != nil {
		return Counts{}, err
	}
	nowMs := now.UnixMilli()
	args := append([]any{nowMs}, s.filter...)
	var c Counts
	var oldest *int64
	for {
		s.mu.Lock()
		if s.layout != pgPausesByNamespace && now.Sub(s.layoutAt) > relearnLayout {
			s.layout = pgPausesByNamespace
		}
		layout := s.layout
		s.mu.Unlock()
		err = pool.QueryRow(ctx, s.counts[layout], args...).Scan(&c.Pending, &c.Running, &oldest, &c.Paused)
		var pe *pgconn.PgError
		if err == nil || !errors.As(err, &pe) || layout == pgNoPauses {
			break
		}
		// A database of an older flexiq: fall back to the layout it has.
		// The error says which table or column is missing.
		next := layout
		switch {
		case pe.Code == "42703" && layout == pgPausesByNamespace && strings.Contains(pe.Message, "namespace"):
			next = pgPausesByQueue
		case pe.Code == "42P01" && strings.Contains(pe.Message, "queue_state"):
			next = pgNoPauses
		}
		if next == layout {
			break
		}
		s.mu.Lock()
		s.layout, s.layoutAt = next, now
		s.mu.Unlock()
	}
	if err != nil {
		return Counts{}, s.fail("reading jobs", err)
	}
	if oldest != nil {
		c.OldestAge = max(time.Duration(nowMs-*oldest)*time.Millisecond, 0)
		c.HasOldest = true
	}
	return c, nil
}

// Threads reads flexiq's workers table (schema.rs: last_heartbeat in Unix
// ms, queues, threads, namespace). to_jsonb reads the namespace column
// where the table has one, and NULL where an older flexiq made it without.
func (s *flexiqPostgres) Threads(ctx context.Context, now time.Time) (int, bool, error) {
	pool, err := s.connect()
	if err != nil {
		return 0, false, err
	}
	rows, err := pool.Query(ctx, `SELECT last_heartbeat, coalesce(queues, ''), threads, to_jsonb(w)->>'namespace'
FROM `+s.schema+`.workers AS w WHERE last_heartbeat >= $1`, now.Add(-LiveWorkerWindow).UnixMilli())
	if err != nil {
		return 0, false, s.fail("reading workers", err)
	}
	var workers []liveWorker
	for rows.Next() {
		var w liveWorker
		var ns *string
		if err := rows.Scan(&w.heartbeatMs, &w.queues, &w.threads, &ns); err != nil {
			rows.Close()
			return 0, false, s.fail("reading workers", err)
		}
		if ns != nil {
			w.namespace, w.hasNS = *ns, true
		}
		workers = append(workers, w)
	}
	if err := rows.Err(); err != nil {
		return 0, false, s.fail("reading workers", err)
	}
	n, ok := pickThreads(workers, s.spec.Queues, s.spec.Namespace, now)
	return n, ok, nil
}

func (s *flexiqPostgres) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pool != nil {
		s.pool.Close()
		s.pool = nil
	}
	return nil
}
