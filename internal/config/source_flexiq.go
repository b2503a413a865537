package config

// FlexiqNet holds the settings of the source types flexiq-postgres,flexiq-redis.
// (Filled in by the work on issue 8; see source.go for how a type registers.)
type FlexiqNet struct{}

// rawFlexiqNet holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawFlexiqNet struct{}

// effectiveFlexiqNet is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectiveFlexiqNet struct{}

func (s Source) effectiveFlexiqNet() effectiveFlexiqNet { return effectiveFlexiqNet{} }
