package config

import (
	"fmt"
	"slices"
)

// SourceTypeDocs documents each source type's table, [pools.NAME.source]
// with its type, in the order of SourceTypes.
//
// A stand-in: the source types move to internal/source, each with its own
// KeyDocs, and this file gives way to theirs (sourcetype.go). Until then it
// names each type's keys, and the words are on docs/sources/.
func SourceTypeDocs() []TableDoc {
	sourcePages := map[string]string{
		SourceFlexiqSQLite: "flexiq.md", SourceSQLiteQuery: "flexiq.md", SourceFlexiqPostgres: "flexiq.md", SourceFlexiqRedis: "flexiq.md",
		SourcePostgresQuery: "postgres.md", SourceRiver: "postgres.md", SourcePgBoss: "postgres.md", SourceGraphileWorker: "postgres.md",
		SourceOban: "postgres.md", SourceGoodJob: "postgres.md", SourceSolidQueue: "postgres.md",
		SourceRedis: "redis.md", SourceBullMQ: "redis.md", SourceCelery: "redis.md", SourceRQ: "redis.md", SourceSidekiq: "redis.md",
		SourcePrometheus: "prometheus.md", SourceCommand: "command.md",
	}
	var docs []TableDoc
	for _, name := range SourceTypes() {
		t := TableDoc{
			Name:  "pools.NAME.source",
			Title: fmt.Sprintf("`type = %q`", name),
			Doc:   fmt.Sprintf("What a `%s` source reads, and how to set it up: [docs/sources/%s](sources/%s).", name, sourcePages[name], sourcePages[name]),
			Keys:  []KeyDoc{{Name: "type", Type: "string", Required: true, Limits: fmt.Sprintf("`%q`", name), Doc: "The source type."}},
		}
		for _, k := range slices.Sorted(slices.Values(sourceKinds[name].keys)) {
			t.Keys = append(t.Keys, KeyDoc{Name: k})
		}
		docs = append(docs, t)
	}
	return docs
}
