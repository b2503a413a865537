package controller

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/poolstore"
)

// The state file carries across a restart of the daemon (a package upgrade,
// the watchdog, a crash) what the pool decided: its target, the
// recommendations in its stabilisation windows, the slots backing off, and
// the rollout nonce. Without it, the first tick after a restart would act on
// its raw recommendation alone: a pool held at 8 in a lull would drop to 1 on
// the first tick after `apt upgrade`.
//
// It lives in the daemon's runtime directory (/run/flexiq-scaled, kept
// across restarts with RuntimeDirectoryPreserve=), a tmpfs: a reboot starts
// afresh, which is right, since no worker survives one. Times are on the
// controller's clock, CLOCK_MONOTONIC, which every process on the host shares
// until the next boot.

const stateVersion = 1

type savedState struct {
	Version int    `json:"version"`
	Pool    string `json:"pool"`
	// SavedAt is when the file was written, in nanoseconds of CLOCK_MONOTONIC.
	SavedAt int64                `json:"saved_at_mono_ns"`
	Target  int                  `json:"target"`
	History []savedSample        `json:"history"`
	Backoff map[int]savedBackoff `json:"backoff,omitempty"`
	Roll    string               `json:"roll_nonce,omitempty"`
	// The rate limits' events and the rules' cooldowns (decide/local.go).
	decide.SavedScaling
}

type savedSample struct {
	At  int64 `json:"at_mono_ns"`
	Raw int   `json:"raw"`
}

type savedBackoff struct {
	Delay int64 `json:"delay_ns"`
	Until int64 `json:"until_mono_ns"`
}

// stateStore is where the state file is kept: pool-POOL.json in the
// runtime directory.
func (p *Pool) stateStore() poolstore.Store[savedState] {
	return poolstore.Store[savedState]{Dir: p.opts.StateDir, Prefix: "pool-"}
}

func (p *Pool) statePath() string { return p.stateStore().Path(p.name) }

// saveState writes the state file, atomically: a crash mid-write leaves the
// previous file. Failing to write costs only the continuity of a later
// restart, so it is logged and the tick goes on.
func (p *Pool) saveState(now time.Time) {
	if p.statePath() == "" {
		return
	}
	st := savedState{Version: stateVersion, Pool: p.name, SavedAt: int64(monoSince(now)), Target: p.workers.target, Roll: p.workers.roll.nonce,
		SavedScaling: p.dec.Memory().SaveScaling()}
	for _, s := range p.dec.Memory().Recommender().History() {
		st.History = append(st.History, savedSample{At: int64(monoSince(s.At)), Raw: s.Raw})
	}
	for slot, b := range p.workers.slots.Backoff {
		if now.Before(b.Until) || b.Delay > backoffMin {
			if st.Backoff == nil {
				st.Backoff = map[int]savedBackoff{}
			}
			st.Backoff[slot] = savedBackoff{Delay: int64(b.Delay), Until: int64(monoSince(b.Until))}
		}
	}
	if err := p.stateStore().Save(p.name, st); err != nil {
		if log, _ := p.report.stateLog.Fail(now); log {
			p.log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot save its state (a restart would forget its windows): %v", err)
		}
		return
	}
	p.report.stateLog.OK()
}

// loadState reads the state file. It returns nil and why when there is none
// to use: no file is no reason worth a warning, a corrupt, foreign or stale
// one is.
func (p *Pool) loadState(now time.Time) (*savedState, string) {
	// Read, not Load: the bytes are parsed twice below.
	b, ok, err := p.stateStore().Read(p.name)
	if !ok {
		return nil, ""
	}
	if err != nil {
		return nil, err.Error()
	}
	st, why := parseState(b, p.name, now, p.longestWindow())
	if st == nil && p.workers.roll.nonce == "" {
		// The rollout nonce is no scaling decision: keep it from a state
		// that is otherwise too old, or the next start would replace every
		// worker that the last `roll` started.
		var partial savedState
		if json.Unmarshal(b, &partial) == nil && partial.Version == stateVersion && partial.Pool == p.name {
			p.workers.roll.nonce = partial.Roll
		}
	}
	if st == nil {
		return nil, fmt.Sprintf("%s: %s", p.statePath(), why)
	}
	return st, ""
}

// parseState checks a state file's content for the pool at now.
func parseState(b []byte, pool string, now time.Time, longest time.Duration) (*savedState, string) {
	var st savedState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, "corrupt: " + err.Error()
	}
	switch age := monoSince(now) - time.Duration(st.SavedAt); {
	case st.Version != stateVersion:
		return nil, fmt.Sprintf("unknown version %d (this daemon writes %d)", st.Version, stateVersion)
	case st.Pool != pool:
		return nil, fmt.Sprintf("written for pool %q", st.Pool)
	case age < 0:
		return nil, "written in the future: not from this boot"
	case age > longest:
		return nil, fmt.Sprintf("%s old, older than the longest window (%s)", age.Round(time.Second), longest)
	case st.Target < 0:
		return nil, fmt.Sprintf("corrupt: target %d", st.Target)
	}
	return &st, ""
}

// restore applies a saved state.
func (p *Pool) restore(now time.Time, st *savedState) {
	p.workers.target = st.Target
	p.workers.roll.nonce = st.Roll
	samples := make([]policy.Sample, 0, len(st.History))
	for _, s := range st.History {
		samples = append(samples, policy.Sample{At: monoTime(time.Duration(s.At)), Raw: s.Raw})
	}
	p.dec.Memory().Recommender().Restore(now, samples)
	p.dec.Memory().RestoreScaling(now, st.SavedScaling)
	for slot, b := range st.Backoff {
		if slot > 0 && b.Delay > 0 {
			p.workers.slots.Backoff[slot] = &slotBackoff{Delay: time.Duration(b.Delay), Until: monoTime(time.Duration(b.Until))}
		}
	}
}

func (p *Pool) longestWindow() time.Duration {
	return max(p.cfg.ScaleUpWindow, p.cfg.ScaleDownWindow, backoffMax, p.dec.Memory().ScalingLongest())
}
