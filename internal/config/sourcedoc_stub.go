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
//
// Each type's page is docs/sources/TYPE.md, by convention rather than by a
// table, so that a new type needs no entry here: TestDocsLinks fails when
// a type has no page, as the generated reference links it.
func SourceTypeDocs() []TableDoc {
	var docs []TableDoc
	for _, name := range SourceTypes() {
		t := TableDoc{
			Name:  "pools.NAME.source",
			Title: fmt.Sprintf("`type = %q`", name),
			Doc:   fmt.Sprintf("What a `%s` source reads, and how to set it up: [docs/sources/%s.md](sources/%s.md).", name, name, name),
			Keys:  []KeyDoc{{Name: "type", Type: "string", Required: true, Limits: fmt.Sprintf("`%q`", name), Doc: "The source type."}},
		}
		if name == SourceFlexiqSQLite {
			t.Keys[0].Required, t.Keys[0].Default = false, `"flexiq-sqlite"`
		}
		for _, k := range slices.Sorted(slices.Values(sourceKinds[name].keys)) {
			d := stubKeys[k]
			d.Name = k
			t.Keys = append(t.Keys, d)
		}
		docs = append(docs, t)
	}
	return docs
}

// stubKeys are the words for the source keys until each type documents its
// own; what a key means for a given type is on its page.
var stubKeys = map[string]KeyDoc{
	"path":                {Type: "string", Required: true, Limits: "absolute path", Doc: "The SQLite database file."},
	"queues":              {Type: "array of strings", Doc: "The queues to count, summed."},
	"namespace":           {Type: "string", Doc: "Count only jobs in this namespace."},
	"query":               {Type: "string", Required: true, Limits: "not blank", Doc: "A read-only query returning the counts."},
	"params":              {Type: "table", Doc: "Named parameters of the query."},
	"schema":              {Type: "string", Doc: "The schema of the system's tables."},
	"key_prefix":          {Type: "string", Doc: "The prefix of the system's keys."},
	"keys":                {Type: "array of tables", Doc: "The Redis keys to count, each with its role."},
	"url":                 {Type: "string", Doc: "The server; one of `url`, `url_file` and `url_credential` is required. No password in it."},
	"url_file":            {Type: "string", Doc: "A root-only file holding the server's URL."},
	"url_credential":      {Type: "string", Doc: "A systemd credential holding the server's URL."},
	"password_file":       {Type: "string", Doc: "A root-only file holding the password."},
	"password_credential": {Type: "string", Doc: "A systemd credential holding the password."},
	"pending_query":       {Type: "string", Required: true, Limits: "not blank", Doc: "Its single sample is *pending*."},
	"running_query":       {Type: "string", Limits: "not blank", Doc: "Its single sample is *running*."},
	"paused_query":        {Type: "string", Limits: "not blank", Doc: "Jobs held back by a pause."},
	"oldest_age_query":    {Type: "string", Limits: "not blank", Doc: "The oldest pending job's age in seconds."},
	"scrape_interval_sec": {Type: "seconds", Default: "15", Limits: "`> 0`", Doc: "The server's scrape interval."},
	"empty_result":        {Type: "string", Default: `"zero"`, Limits: "`\"zero\"` or `\"hold\"`", Doc: "What a query that returns no sample means."},
	"command":             {Type: "array of strings", Required: true, Limits: "the program's absolute path, then its arguments", Doc: "Run directly, without a shell."},
	"timeout_sec":         {Type: "number", Default: "10", Limits: "`> 0`", Doc: "How long a run may take."},
}
