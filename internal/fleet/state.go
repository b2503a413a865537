package fleet

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// The decision pipeline's memory, carried in Plan.State so that a new
// leader continues the old one's windows: exactly what the controller
// saves across a restart of the daemon (internal/controller state.go and
// decide/local.go: the recommendations in the stabilisation windows, the rate
// limits' events, the rules' cooldowns and last busy tick), plus the
// recommender's Memory (the burst-onset service time and the keep-warm
// tick), which a restart loses but a leader re-reading the state every tick
// must not. Times are the store's clock (the leader decides on it), in
// Unix nanoseconds; 0 is the zero time.

// stateVersion is the encoding's version. A leader that reads another
// version starts its windows afresh rather than misread them (a fleet
// upgrade rolls hosts one by one: the old and the new leader may differ).
const stateVersion = 1

type savedState struct {
	Version     int              `json:"v"`
	History     []savedSample    `json:"history,omitempty"`
	Events      []savedEvent     `json:"events,omitempty"`
	RuleFired   map[string]int64 `json:"rule_fired,omitempty"`
	LastBusy    int64            `json:"last_busy,omitempty"`
	ServiceTime int64            `json:"service_time_ns,omitempty"`
	LastWork    int64            `json:"last_work,omitempty"`
	Worked      bool             `json:"worked,omitempty"`
}

type savedSample struct {
	At  int64 `json:"at"`
	Raw int   `json:"raw"`
}

type savedEvent struct {
	At     int64 `json:"at"`
	Change int   `json:"change"`
}

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// EncodeState serialises pl's memory (Rec and Limiter must be set; Rules
// may be nil).
func EncodeState(pl *policy.Pipeline) ([]byte, error) {
	st := savedState{Version: stateVersion}
	for _, s := range pl.Rec.History() {
		st.History = append(st.History, savedSample{At: unixNano(s.At), Raw: s.Raw})
	}
	for _, e := range pl.Limiter.Events() {
		st.Events = append(st.Events, savedEvent{At: unixNano(e.At), Change: e.Change})
	}
	if rs := pl.Rules; rs != nil {
		for k, t := range rs.LastFired {
			if st.RuleFired == nil {
				st.RuleFired = map[string]int64{}
			}
			st.RuleFired[k] = unixNano(t)
		}
		st.LastBusy = unixNano(rs.LastBusy)
	}
	m := pl.Rec.Memory()
	st.ServiceTime, st.LastWork, st.Worked = int64(m.ServiceTime), unixNano(m.LastWork), m.Worked
	b, err := json.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("fleet: encoding the windows' state: %w", err)
	}
	return b, nil
}

// RestoreState replaces pl's memory with the one encoded in b, at now (the
// store's clock): what lies after now is dropped, as the policy's Restore
// does. Empty b is no memory (the fleet's first plan). On an error (a
// corrupt state, another version) pl's memory is emptied, so that the
// windows start afresh, and the error says why.
func RestoreState(pl *policy.Pipeline, now time.Time, b []byte) error {
	var st savedState
	var err error
	switch {
	case len(b) == 0:
		st.Version = stateVersion
	default:
		if e := json.Unmarshal(b, &st); e != nil {
			err = fmt.Errorf("fleet: the plan's windows state is corrupt (windows start afresh): %w", e)
		} else if st.Version != stateVersion {
			err = fmt.Errorf("fleet: the plan's windows state has version %d, this daemon reads %d (windows start afresh)", st.Version, stateVersion)
		}
		if err != nil {
			st = savedState{}
		}
	}
	samples := make([]policy.Sample, 0, len(st.History))
	for _, s := range st.History {
		samples = append(samples, policy.Sample{At: fromUnixNano(s.At), Raw: s.Raw})
	}
	pl.Rec.Restore(now, samples)
	events := make([]policy.ScaleEvent, 0, len(st.Events))
	for _, e := range st.Events {
		events = append(events, policy.ScaleEvent{At: fromUnixNano(e.At), Change: e.Change})
	}
	pl.Limiter.Restore(now, events)
	if rs := pl.Rules; rs != nil {
		clear(rs.LastFired)
		if rs.LastFired == nil {
			rs.LastFired = map[string]time.Time{}
		}
		for k, at := range st.RuleFired {
			if t := fromUnixNano(at); !t.IsZero() && !t.After(now) {
				rs.LastFired[k] = t
			}
		}
		rs.LastBusy = time.Time{}
		if t := fromUnixNano(st.LastBusy); !t.After(now) {
			rs.LastBusy = t
		}
	}
	pl.Rec.RestoreMemory(now, policy.Memory{
		ServiceTime: time.Duration(st.ServiceTime),
		LastWork:    fromUnixNano(st.LastWork),
		Worked:      st.Worked,
	})
	return err
}
