package controller

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/controller/decide"
	"github.com/flexiq/flexiq-scaled/internal/controller/workers"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/poolstore"
	"github.com/flexiq/flexiq-scaled/internal/slots"
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

// stateFile is the pool's state file: pool-POOL.json in the runtime
// directory. It reads and writes the file; what goes in it is the pool's
// (saveFrom, restoreInto).
type stateFile struct {
	pool  string
	store poolstore.Store[savedState]
	// fails is a run of failed saves, logged once.
	fails *eventlog.Throttle
}

func newStateFile(pool, dir string) stateFile {
	return stateFile{pool: pool, store: poolstore.Store[savedState]{Dir: dir, Prefix: "pool-"}, fails: eventlog.NewThrottle(sourceLogRate)}
}

func (f stateFile) path() string { return f.store.Path(f.pool) }

func (f stateFile) remove() error { return f.store.Remove(f.pool) }

// save writes st, atomically: a crash mid-write leaves the previous file.
// Failing to write costs only the continuity of a later restart, so it is
// logged and the tick goes on.
func (f stateFile) save(now time.Time, st savedState, log *eventlog.Logger) {
	if err := f.store.Save(f.pool, st); err != nil {
		if l, _ := f.fails.Fail(now); l {
			log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "cannot save its state (a restart would forget its windows): %v", err)
		}
		return
	}
	f.fails.OK()
}

// load reads the state file. It returns nil and why when there is none to
// use: no file is no reason worth a warning, a corrupt, foreign or stale
// one is. roll is the rollout nonce of a file otherwise too old.
func (f stateFile) load(now time.Time, longest time.Duration) (st *savedState, roll, why string) {
	// Read, not Load: the bytes are parsed twice below.
	b, ok, err := f.store.Read(f.pool)
	if !ok {
		return nil, "", ""
	}
	if err != nil {
		return nil, "", err.Error()
	}
	st, why = parseState(b, f.pool, now, longest)
	if st != nil {
		return st, "", ""
	}
	// The rollout nonce is no scaling decision: keep it from a state that
	// is otherwise too old, or the next start would replace every worker
	// that the last `roll` started.
	var partial savedState
	if json.Unmarshal(b, &partial) == nil && partial.Version == stateVersion && partial.Pool == f.pool {
		roll = partial.Roll
	}
	return nil, roll, fmt.Sprintf("%s: %s", f.path(), why)
}

// saveFrom writes what the pool decided (the workers' target, rollout and
// backoffs, the decision's memory) to the state file.
func (f stateFile) saveFrom(now time.Time, ws *workers.Workers, mem *decide.Local, log *eventlog.Logger) {
	if f.path() == "" {
		return
	}
	st := savedState{Version: stateVersion, Pool: f.pool, SavedAt: int64(monoSince(now)), Target: ws.Target, Roll: ws.Roll.Nonce,
		SavedScaling: mem.SaveScaling()}
	for _, s := range mem.Recommender().History() {
		st.History = append(st.History, savedSample{At: int64(monoSince(s.At)), Raw: s.Raw})
	}
	for slot, b := range ws.Slots.Backoff {
		if now.Before(b.Until) || b.Delay > slots.BackoffMin {
			if st.Backoff == nil {
				st.Backoff = map[int]savedBackoff{}
			}
			st.Backoff[slot] = savedBackoff{Delay: int64(b.Delay), Until: int64(monoSince(b.Until))}
		}
	}
	f.save(now, st, log)
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

// restoreInto applies the state file to the workers and the decision's
// memory at start, and says what it did.
func (f stateFile) restoreInto(now time.Time, cfg *config.Pool, ws *workers.Workers, mem *decide.Local, log *eventlog.Logger) {
	st, roll, why := f.load(now, max(cfg.ScaleUpWindow, cfg.ScaleDownWindow, slots.BackoffMax, mem.ScalingLongest()))
	if st == nil {
		if ws.Roll.Nonce == "" {
			ws.Roll.Nonce = roll
		}
		if why != "" {
			log.Event(eventlog.Lifecycle, eventlog.Warning, nil, "ignoring its state file: %s", why)
		}
		return
	}
	ws.Target = st.Target
	ws.Roll.Nonce = st.Roll
	samples := make([]policy.Sample, 0, len(st.History))
	for _, s := range st.History {
		samples = append(samples, policy.Sample{At: monoTime(time.Duration(s.At)), Raw: s.Raw})
	}
	mem.Recommender().Restore(now, samples)
	mem.RestoreScaling(now, st.SavedScaling)
	for slot, b := range st.Backoff {
		if slot > 0 && b.Delay > 0 {
			ws.Slots.Backoff[slot] = &slots.Backoff{Delay: time.Duration(b.Delay), Until: monoTime(time.Duration(b.Until))}
		}
	}
	log.Event(eventlog.Lifecycle, eventlog.Info, nil,
		"restored its state from %s: target %d, %d recommendations in its windows", f.path(), ws.Target, len(st.History))
}
