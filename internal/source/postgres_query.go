package source

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// postgresQuery runs the operator's own query, which returns one row with
// the columns pending and running, and optionally paused and oldest_age_sec
// (seconds, NULL when nothing is pending). The query decides what counts as
// pending: ready now, not future-scheduled, not in a paused queue.
//
// Parameters: @NAME in the query is bound to the NAME entry of
// [pools.X.source.params], by pgx's named arguments, which rewrite each
// @NAME to a positional $n (in order of first appearance) and send the
// values separately: no value is ever spliced into the SQL text. An @NAME
// inside a string literal or a comment is left alone.
//
// It runs in a READ ONLY transaction with a statement_timeout of the tick's
// time left, so a query that would write is refused by the server, and a
// slow one is cut off there too.
type postgresQuery struct {
	*pgDB
	query  string
	params pgx.NamedArgs
}

func init() {
	register(config.SourcePostgresQuery, func(spec config.Source) (Source, error) {
		if spec.Query == "" {
			return nil, fmt.Errorf("%s source: query is empty", spec.Type)
		}
		return &postgresQuery{pgDB: newPgDB(spec), query: spec.Query, params: pgx.NamedArgs(spec.Postgres.Params)}, nil
	})
}

func (s *postgresQuery) Observe(ctx context.Context, _ time.Time) (Counts, error) {
	if len(s.params) == 0 {
		return s.read(ctx, s.query)
	}
	return s.read(ctx, s.query, s.params)
}

// pgPreset is a queue system's preset: a fixed query against its own
// tables, with the pool's queues bound as $1 (a text[], NULL for all).
type pgPreset struct {
	*pgDB
	query  string
	queues []string
}

func (s *pgPreset) Observe(ctx context.Context, _ time.Time) (Counts, error) {
	var queues any // NULL: every queue
	if len(s.queues) > 0 {
		queues = s.queues
	}
	return s.read(ctx, s.query, queues)
}

// pgListeningPreset is a preset whose system notifies its inserts on a
// channel: it is a Watcher.
type pgListeningPreset struct {
	*pgPreset
	channel string
}

func (s *pgListeningPreset) Watch(ctx context.Context, wake func()) (string, error) {
	return s.listen(ctx, s.channel, wake)
}

// registerListeningPreset registers a preset that also LISTENs on the
// channel that channel names for the (unquoted) schema.
func registerListeningPreset(typ string, build func(schema string) string, channel func(schema string) string) {
	registerPreset(typ, build)
	open := openers[typ]
	openers[typ] = func(spec config.Source) (Source, error) {
		src, err := open(spec)
		if err != nil {
			return nil, err
		}
		schema := spec.Schema
		if schema == "" {
			schema = config.DefaultPostgresSchema[typ]
		}
		return &pgListeningPreset{pgPreset: src.(*pgPreset), channel: channel(schema)}, nil
	}
}

// registerPreset registers a preset whose query build makes from the
// schema's quoted name ("" where the system has no schema setting).
func registerPreset(typ string, build func(schema string) string) {
	register(typ, func(spec config.Source) (Source, error) {
		schema := spec.Schema
		if schema == "" {
			schema = config.DefaultPostgresSchema[typ]
		}
		if schema != "" {
			schema = pgx.Identifier{schema}.Sanitize()
		}
		return &pgPreset{pgDB: newPgDB(spec), query: build(schema), queues: spec.Queues}, nil
	})
}
