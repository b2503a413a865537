package config

// Postgres holds the settings of the source types postgres-query.
// (Filled in by the work on issue 8; see source.go for how a type registers.)
type Postgres struct{}

// rawPostgres holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawPostgres struct{}

// effectivePostgres is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectivePostgres struct{}

func (s Source) effectivePostgres() effectivePostgres { return effectivePostgres{} }
