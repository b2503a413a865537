package config

// Redis holds the settings of the source types redis.
// (Filled in by the work on issue 8; see source.go for how a type registers.)
type Redis struct{}

// rawRedis holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawRedis struct{}

// effectiveRedis is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectiveRedis struct{}

func (s Source) effectiveRedis() effectiveRedis { return effectiveRedis{} }
