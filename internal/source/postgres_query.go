package source

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
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

// TypePostgresQuery runs the operator's own read-only query.
const TypePostgresQuery = "postgres-query"

// PostgresQuerySettings are a postgres-query source's keys.
type PostgresQuerySettings struct {
	Query string `toml:"query,omitempty"`
	config.Conn
	// Params are the named parameters: @NAME in the query is bound to
	// Params[NAME] (string, int64, float64, bool, time.Time, or a
	// []string / []int64 for = ANY(@NAME)).
	Params map[string]any `toml:"params,omitempty"`
}

func init() {
	define(config.SourceType{
		Name: TypePostgresQuery,
		Doc: "Runs your read-only query, which returns one row with the columns `pending` and `running`, and " +
			"optionally `paused` and `oldest_age_sec` (seconds, `NULL` when nothing is pending), in a READ ONLY " +
			"transaction whose statement_timeout is the tick's time left. The URL is postgres:// or postgresql://.",
		Keys: append(slices.Clone(config.ConnKeys),
			config.KeyDoc{Name: "query", Type: "string", Required: true, Limits: "not blank",
				Doc: "The `SELECT` returning pending, running and optionally oldest_age_sec and paused, by column name."},
			config.KeyDoc{Name: "params", Type: "table", Limits: "each used in the query as @NAME",
				Doc: "Named parameters, `[pools.NAME.source.params]`: `@NAME` in the query is bound to the key `NAME` by " +
					"pgx's named arguments, which send the values apart from the SQL text (never spliced in). Values: " +
					"string, integer, float, boolean, date-time, or an array of strings or integers (`= ANY(@NAME)`)."}),
	}, 0, decodePostgresQuery, func(s PostgresQuerySettings) (Source, error) {
		if s.Query == "" {
			return nil, fmt.Errorf("%s source: query is empty", TypePostgresQuery)
		}
		return &postgresQuery{pgDB: newPgDB(TypePostgresQuery, s.Conn), query: s.Query, params: pgx.NamedArgs(s.Params)}, nil
	})
}

// paramNameRE is a parameter's name as pgx's named arguments read it after
// the @.
var paramNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func decodePostgresQuery(d *config.SourceDecoder) PostgresQuerySettings {
	var s PostgresQuerySettings
	d.Conn(&s.Conn, postgresSchemes...)
	hasQuery := d.String("query", &s.Query)
	switch {
	case !d.Has("query"):
		d.Errorf("query", "required for %s sources: a SELECT returning pending, running [, oldest_age_sec] [, paused]", TypePostgresQuery)
	case hasQuery && strings.TrimSpace(s.Query) == "":
		d.Errorf("query", "must not be empty")
	}
	if !d.Has("params") {
		return s
	}
	m, ok := d.Raw("params").(map[string]any)
	if !ok {
		d.WrongType("params", "a table of parameters, as in [pools.NAME.source.params]")
		return s
	}
	params := make(map[string]any, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		if !paramNameRE.MatchString(name) {
			d.SubErrorf("params", name, "not a parameter name: letters, digits and _, not starting with a digit (the query refers to it as @NAME)")
			continue
		}
		v, err := paramValue(m[name])
		if err != nil {
			d.SubErrorf("params", name, "%v", err)
			continue
		}
		params[name] = v
		// A parameter the query never uses is most likely a typo in one
		// or the other; pgx would silently bind nothing.
		if hasQuery && !regexp.MustCompile(`(^|[^A-Za-z0-9_@])@`+name+`\b`).MatchString(s.Query) {
			d.SubErrorf("params", name, "the query does not use it: refer to it as @%s", name)
		}
	}
	if len(params) > 0 {
		s.Params = params
	}
	return s
}

// paramValue converts a TOML value to what pgx binds: scalars as they are,
// arrays of strings or integers as Go slices (for = ANY(@NAME)).
func paramValue(raw any) (any, error) {
	switch v := raw.(type) {
	case string, int64, float64, bool, time.Time:
		return v, nil
	case []any:
		if len(v) == 0 {
			return []string{}, nil
		}
		switch v[0].(type) {
		case string:
			out := make([]string, len(v))
			for i, e := range v {
				s, ok := e.(string)
				if !ok {
					return nil, fmt.Errorf("element %d must be a string like the first, not %s", i+1, config.Describe(e))
				}
				out[i] = s
			}
			return out, nil
		case int64:
			out := make([]int64, len(v))
			for i, e := range v {
				n, ok := e.(int64)
				if !ok {
					return nil, fmt.Errorf("element %d must be an integer like the first, not %s", i+1, config.Describe(e))
				}
				out[i] = n
			}
			return out, nil
		}
		return nil, fmt.Errorf("an array parameter must hold strings or integers, not %s", config.Describe(v[0]))
	}
	return nil, fmt.Errorf("must be a string, an integer, a float, a boolean, a date-time, or an array of strings or integers, not %s", config.Describe(raw))
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

// A pgPresetDef is one queue system's preset, as its file defines it.
type pgPresetDef struct {
	name, doc string
	// schema is the schema the system uses unless told otherwise; "" for a
	// system without a schema setting (good_job, Solid Queue: their tables
	// are wherever the connection's search_path finds them).
	schema string
	// query builds the preset's query from the schema's quoted name.
	query func(schema string) string
	// channel, when set, names the channel the system notifies its inserts
	// on, for the (unquoted) schema: the source then LISTENs there.
	channel func(schema string) string
}

// PgPresetSettings are the keys of a PostgreSQL preset with a schema
// setting; PgQueuesSettings those of one without.
type PgPresetSettings struct {
	Queues []string `toml:"queues,omitempty"`
	Schema string   `toml:"schema,omitempty"`
	config.Conn
}

// PgQueuesSettings are the keys of a PostgreSQL preset without a schema
// setting.
type PgQueuesSettings struct {
	Queues []string `toml:"queues,omitempty"`
	config.Conn
}

// pgSchemaRE is a schema name the presets accept: an unquoted identifier. The
// sources quote it anyway; this keeps a typo such as "pg-boss" from turning
// into a schema that does not exist.
var pgSchemaRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

// definePgPreset registers a preset with its keys: the connection, the
// queues and, for a system that has one, the schema.
func definePgPreset(p pgPresetDef) {
	keys := append(slices.Clone(config.ConnKeys), config.KeyDoc{Name: "queues", Type: "array of strings",
		Default: "all queues", Limits: "no empty names", Doc: "Count only jobs in these queues. `[]` means all queues."})
	t := config.SourceType{Name: p.name, Doc: p.doc + " The URL is postgres:// or postgresql://.", Keys: keys}
	var caps Caps
	if p.channel != nil {
		caps = Watches
	}
	if p.schema == "" {
		define(t, caps, func(d *config.SourceDecoder) PgQueuesSettings {
			var s PgQueuesSettings
			d.Conn(&s.Conn, postgresSchemes...)
			d.Queues(&s.Queues)
			return s
		}, func(s PgQueuesSettings) (Source, error) { return p.open(s.Conn, s.Queues, "") })
		return
	}
	t.Keys = append(t.Keys, config.KeyDoc{Name: "schema", Type: "string", Default: fmt.Sprintf("%q", p.schema),
		Limits: "letters, digits, _ and $, not starting with a digit", Doc: "The schema of the system's tables."})
	define(t, caps, func(d *config.SourceDecoder) PgPresetSettings {
		var s PgPresetSettings
		d.Conn(&s.Conn, postgresSchemes...)
		d.Queues(&s.Queues)
		s.Schema = p.schema
		if d.String("schema", &s.Schema) && !pgSchemaRE.MatchString(s.Schema) {
			d.Errorf("schema", "%q is not a schema name (letters, digits, _ and $, not starting with a digit)", s.Schema)
		}
		return s
	}, func(s PgPresetSettings) (Source, error) { return p.open(s.Conn, s.Queues, s.Schema) })
}

// open opens the preset for a schema ("" for the system's own).
func (p pgPresetDef) open(conn config.Conn, queues []string, schema string) (Source, error) {
	if schema == "" {
		schema = p.schema
	}
	quoted := schema
	if quoted != "" {
		quoted = pgx.Identifier{schema}.Sanitize()
	}
	src := &pgPreset{pgDB: newPgDB(p.name, conn), query: p.query(quoted), queues: queues}
	if p.channel == nil {
		return src, nil
	}
	return &pgListeningPreset{pgPreset: src, channel: p.channel(schema)}, nil
}
