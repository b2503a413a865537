package config

// Prometheus holds the settings of the source types prometheus.
// (Filled in by the work on issue 8; see source.go for how a type registers.)
type Prometheus struct{}

// rawPrometheus holds their keys as written; embedded in rawSource, so that its
// fields are keys of [pools.NAME.source] itself.
type rawPrometheus struct{}

// effectivePrometheus is how WriteEffective writes them; embedded in
// effectiveSource. Fields need omitempty: other types leave them unset.
type effectivePrometheus struct{}

func (s Source) effectivePrometheus() effectivePrometheus { return effectivePrometheus{} }
