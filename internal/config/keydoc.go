package config

import "github.com/BurntSushi/toml"

// A KeyDoc documents one key of the configuration file. The reference
// (docs/configuration.md and flexiq-scaled.toml(5)) is generated from these,
// and tests hold each one to what the loader does, so that the docs cannot
// drift from the checks beside which they are declared.
type KeyDoc struct {
	// Name is the key within its table, as written in TOML: "max_workers".
	Name string
	// Type is what the file must hold, in words: "integer", "string",
	// "number", "boolean", "array of strings", "table of strings".
	Type string
	// Default is the value taken when the key is absent, as it would be
	// written in the file ("1", `"flexiq"`), or else words in Markdown
	// ("unset: no cap"), which the tests then cannot load; "" means none,
	// and Required says whether the key must then be written.
	Default  string
	Required bool
	// Limits are the values the loader accepts, in words or as a range:
	// "0 to 10000", "one of none, default, strict".
	Limits string
	// Doc is one paragraph in Markdown: what the key does and why one
	// would set it.
	Doc string
}

// A TableDoc documents one table of the file ("pools.NAME.limits") and its
// keys, in the order the reference lists them. A table documented in parts
// (the worker, scaling, draining keys of [pools.NAME]) is several TableDocs
// of the same Name, each with a Title.
type TableDoc struct {
	Name string
	// Title heads a part of the table; "" for a table in one part.
	Title string
	// Doc comes before the keys, Notes after them: Markdown paragraphs,
	// lists and fenced code blocks.
	Doc   string
	Keys  []KeyDoc
	Notes string
}

// Names lists the table's keys, in order.
func (t TableDoc) Names() []string {
	names := make([]string, len(t.Keys))
	for i, k := range t.Keys {
		names[i] = k.Name
	}
	return names
}

// IsLiteral says whether a Default is a TOML value, which the tests then load,
// rather than words.
func IsLiteral(def string) bool {
	var v map[string]any
	_, err := toml.Decode("k = "+def, &v)
	return err == nil
}
