package replicas

// Readiness is a replica's, as the pool tracks it.
type Readiness int

const (
	Starting Readiness = iota // not ready yet since it started
	Ready                     // serves: in discovery
	Unready                   // was ready, is not: out of discovery
)

func (r Readiness) String() string {
	switch r {
	case Ready:
		return "ready"
	case Unready:
		return "not-ready"
	}
	return "starting"
}
