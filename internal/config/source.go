package config

import (
	"path/filepath"
	"slices"
	"strings"
)

// Source types.
const (
	SourceFlexiqSQLite = "flexiq-sqlite" // flexiq's own task table
	SourceSQLiteQuery  = "sqlite-query"  // any SQLite file, via a SELECT returning pending, running
)

// source builds and checks the [pools.NAME.source] table.
func (l *loader) source(p *Pool, r *rawSource, key func(string) string) {
	s := &p.Source
	known := true
	if l.str(key("type"), r.Type, &s.Type) && s.Type != SourceFlexiqSQLite && s.Type != SourceSQLiteQuery {
		l.add(key("type"), "unknown source type %q (want %q or %q)", s.Type, SourceFlexiqSQLite, SourceSQLiteQuery)
		known = false
	}
	switch {
	case !r.Path.set():
		l.add(key("path"), "missing: the database file to read")
	case !l.str(key("path"), r.Path, &s.Path):
	case !filepath.IsAbs(s.Path):
		l.add(key("path"), "must be an absolute path")
	default:
		// As written: the daemon would hold the pool at 0 for ever,
		// with the file there for everyone but itself to see. This
		// holds under `run --user` too, which has no such sandbox, so
		// that a file means the same to both managers. CheckPaths
		// follows the symlinks.
		if h, hidden := hiddenBy(filepath.Clean(s.Path)); hidden {
			l.add(key("path"), "%s is invisible to the daemon: %s", s.Path, h.explain())
		}
	}

	if l.strings(key("queues"), r.Queues, &s.Queues) {
		if slices.Contains(s.Queues, "") {
			l.add(key("queues"), "queue names must not be empty")
		}
		if len(s.Queues) == 0 {
			s.Queues = nil // an empty filter means all queues, as an absent one does
		}
	}
	l.str(key("namespace"), r.Namespace, &s.Namespace)
	hasQuery := l.str(key("query"), r.Query, &s.Query)
	if !known {
		return // which keys belong depends on the type
	}
	if s.Type == SourceSQLiteQuery {
		for _, k := range []struct {
			name string
			v    value
		}{{"queues", r.Queues}, {"namespace", r.Namespace}} {
			if k.v.set() {
				l.add(key(k.name), "only for %s sources; filter in the query instead", SourceFlexiqSQLite)
			}
		}
		switch {
		case !r.Query.set():
			l.add(key("query"), "required for %s sources: a SELECT returning pending, running", SourceSQLiteQuery)
		case hasQuery && strings.TrimSpace(s.Query) == "":
			l.add(key("query"), "must not be empty")
		}
	} else if r.Query.set() {
		l.add(key("query"), "only for %s sources", SourceSQLiteQuery)
	}
}
