package config

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"
)

// Source types of the PostgreSQL family, which live in this file: a generic
// query, and one preset per job queue system that stores its jobs in
// PostgreSQL.
const (
	SourcePostgresQuery  = "postgres-query"  // the operator's own read-only query
	SourceRiver          = "river"           // River (Go)
	SourcePgBoss         = "pg-boss"         // pg-boss (Node.js)
	SourceGraphileWorker = "graphile-worker" // graphile-worker (Node.js)
	SourceOban           = "oban"            // Oban (Elixir)
	SourceGoodJob        = "good_job"        // good_job (Ruby on Rails)
	SourceSolidQueue     = "solid-queue"     // Solid Queue (Ruby on Rails)
)

// postgresSchemes are the URL schemes libpq (and pgx) accept.
var postgresSchemes = []string{"postgres", "postgresql"}

// DefaultPostgresSchema is the schema each preset's system uses unless told
// otherwise, for the systems that let their users choose one. good_job and
// Solid Queue have none: their tables are wherever the Rails connection's
// search_path puts them.
var DefaultPostgresSchema = map[string]string{
	SourceRiver:          "public",          // River: the connection's search_path, public by default
	SourcePgBoss:         "pgboss",          // pg-boss: the schema constructor option
	SourceGraphileWorker: "graphile_worker", // graphile-worker: the schema option
	SourceOban:           "public",          // Oban: the prefix option
}

// Postgres holds the settings of the source types postgres-query and of the
// presets. Its fields are named after their keys.
type Postgres struct {
	// Params are postgres-query's named parameters: @NAME in the query is
	// bound to Params[NAME] (string, int64, float64, bool, time.Time, or a
	// []string / []int64 for = ANY(@NAME)).
	Params map[string]any
}

// rawPostgres holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself. query and queues are
// rawSource's own, shared with the SQLite family.
type rawPostgres struct {
	Params value `toml:"params"`
}

// effectivePostgres is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectivePostgres struct {
	Params map[string]any `toml:"params,omitempty"`
}

func (s Source) effectivePostgres() effectivePostgres {
	return effectivePostgres{Params: s.Postgres.Params}
}

func init() {
	registerSource(sourceKind{name: SourcePostgresQuery, keys: append(slices.Clone(connKeys), "query", "params"), check: checkPostgresQuery})
	for _, name := range []string{SourceRiver, SourcePgBoss, SourceGraphileWorker, SourceOban, SourceGoodJob, SourceSolidQueue} {
		keys := append(slices.Clone(connKeys), "queues")
		if _, has := DefaultPostgresSchema[name]; has {
			keys = append(keys, "schema")
		}
		registerSource(sourceKind{name: name, keys: keys, check: checkPostgresPreset})
	}
}

// paramNameRE is a parameter's name as pgx's named arguments read it after
// the @.
var paramNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

func checkPostgresQuery(l *loader, s *Source, r *rawSource, key func(string) string) {
	l.conn(s, r, key, postgresSchemes...)
	hasQuery := l.str(key("query"), r.Query, &s.Query)
	switch {
	case !r.Query.set():
		l.add(key("query"), "required for %s sources: a SELECT returning pending, running [, oldest_age_sec] [, paused]", SourcePostgresQuery)
	case hasQuery && strings.TrimSpace(s.Query) == "":
		l.add(key("query"), "must not be empty")
	}
	if !r.Params.set() {
		return
	}
	m, ok := r.Params.raw.(map[string]any)
	if !ok {
		l.wrongType(key("params"), "a table of parameters, as in [pools.NAME.source.params]", r.Params)
		return
	}
	params := make(map[string]any, len(m))
	for _, name := range slices.Sorted(maps.Keys(m)) {
		pk := key("params") + "." + name
		if !paramNameRE.MatchString(name) {
			l.add(pk, "not a parameter name: letters, digits and _, not starting with a digit (the query refers to it as @NAME)")
			continue
		}
		v, err := paramValue(m[name])
		if err != nil {
			l.add(pk, "%v", err)
			continue
		}
		params[name] = v
		// A parameter the query never uses is most likely a typo in one
		// or the other; pgx would silently bind nothing.
		if hasQuery && !regexp.MustCompile(`(^|[^A-Za-z0-9_@])@`+name+`\b`).MatchString(s.Query) {
			l.add(pk, "the query does not use it: refer to it as @%s", name)
		}
	}
	if len(params) > 0 {
		s.Postgres.Params = params
	}
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
					return nil, fmt.Errorf("element %d must be a string like the first, not %s", i+1, describe(e))
				}
				out[i] = s
			}
			return out, nil
		case int64:
			out := make([]int64, len(v))
			for i, e := range v {
				n, ok := e.(int64)
				if !ok {
					return nil, fmt.Errorf("element %d must be an integer like the first, not %s", i+1, describe(e))
				}
				out[i] = n
			}
			return out, nil
		}
		return nil, fmt.Errorf("an array parameter must hold strings or integers, not %s", describe(v[0]))
	}
	return nil, fmt.Errorf("must be a string, an integer, a float, a boolean, a date-time, or an array of strings or integers, not %s", describe(raw))
}

// pgSchemaRE is a schema name the presets accept: an unquoted identifier. The
// sources quote it anyway; this keeps a typo such as "pg-boss" from turning
// into a schema that does not exist.
var pgSchemaRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_$]*$`)

func checkPostgresPreset(l *loader, s *Source, r *rawSource, key func(string) string) {
	l.conn(s, r, key, postgresSchemes...)
	l.queues(s, r, key)
	def, hasSchema := DefaultPostgresSchema[s.Type]
	if !hasSchema {
		return
	}
	s.Schema = def
	if l.str(key("schema"), r.Schema, &s.Schema) && !pgSchemaRE.MatchString(s.Schema) {
		l.add(key("schema"), "%q is not a schema name (letters, digits, _ and $, not starting with a digit)", s.Schema)
	}
}
