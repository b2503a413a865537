package policy

import "time"

// Sample is one recorded recommendation, as the stabilisation windows see
// it. Exported so that a controller can carry the history across a restart
// of the daemon: without it, the first tick after a restart would act on its
// raw recommendation alone, as if no window had ever been configured.
type Sample struct {
	At  time.Time
	Raw int
}

// History returns the recorded recommendations, oldest first.
func (r *Recommender) History() []Sample {
	out := make([]Sample, len(r.history))
	for i, s := range r.history {
		out[i] = Sample{At: s.at, Raw: s.raw}
	}
	return out
}

// Restore replaces the history with samples (oldest first), as saved by
// History. Samples after now are dropped: they cannot come from this clock.
func (r *Recommender) Restore(now time.Time, samples []Sample) {
	r.history = r.history[:0]
	for _, s := range samples {
		if s.At.After(now) || s.Raw < 0 {
			continue
		}
		r.history = append(r.history, sample{at: s.At, raw: s.Raw})
	}
}

// Seed records n as a recommendation made at now. The Kubernetes HPA does the
// same for a controller that has no history for a target: the replica count
// it finds counts as the latest recommendation, so that nothing scales below
// it within the scale-down window (and, with a scale-up window, nothing above
// it within that one).
func (r *Recommender) Seed(now time.Time, n int) {
	r.history = append(r.history, sample{at: now, raw: n})
}

// Memory is what a Recommender remembers besides its history: the last
// service time observed (the burst-onset signal) and the last tick that saw
// work (keep-warm). Exported so that a fleet's leader can hand it on with
// the windows to the next leader (internal/fleet), which would otherwise
// start with neither signal armed.
type Memory struct {
	ServiceTime time.Duration
	LastWork    time.Time
	Worked      bool
}

// Memory returns what the recommender remembers besides its history.
func (r *Recommender) Memory() Memory {
	return Memory{ServiceTime: r.serviceTime, LastWork: r.lastWork, Worked: r.worked}
}

// RestoreMemory replaces it with m, as saved by Memory. A last tick with
// work after now cannot come from this clock and is dropped.
func (r *Recommender) RestoreMemory(now time.Time, m Memory) {
	r.serviceTime = max(m.ServiceTime, 0)
	r.lastWork, r.worked = m.LastWork, m.Worked
	if m.LastWork.After(now) {
		r.lastWork, r.worked = time.Time{}, false
	}
}
