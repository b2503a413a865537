package config

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
	// written in the file ("1", `"flexiq"`); "" means none, and Required
	// says whether the key must then be written.
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
// keys, in the order the reference lists them.
type TableDoc struct {
	Name string
	Doc  string
	Keys []KeyDoc
}
