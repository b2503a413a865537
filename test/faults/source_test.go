package faults

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// takeDBAway moves the test's database out of the daemon's sight, as a
// broken mount or a botched migration would, and returns the way back. The
// test's own connection keeps the moved files open, so it can still change
// the demand meanwhile.
func (e *env) takeDBAway() (back func()) {
	e.T.Helper()
	moved := []string{}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if err := os.Rename(e.HostDB+suffix, e.HostDB+".away"+suffix); err == nil {
			moved = append(moved, suffix)
		} else if !os.IsNotExist(err) {
			e.T.Fatal(err)
		}
	}
	return func() {
		for _, suffix := range moved {
			if err := os.Rename(e.HostDB+".away"+suffix, e.HostDB+suffix); err != nil {
				e.T.Fatal(err)
			}
		}
	}
}

// The source down for three scale-down windows: the pool holds (missing
// data never scales down), STATUS= shows "?" for the pending count, and
// when the source comes back the recovery is logged and the pool scales
// down to its floor once the window has passed.
func TestSourceDownThreeWindows(t *testing.T) {
	e := setup(t, "source-down-3-windows")
	const window = 4 * time.Second
	e.Configure(e.demandPool("down", fmt.Sprintf("min_workers = 2\nmax_workers = 6\nscale_down_window_sec = %g\n", window.Seconds())))
	e.setDemand(4, 0)
	e.StartDaemon()
	e.waitLive("down", 4, 15*time.Second)

	// STATUS= is sent every WatchdogSec/3: wait for the current one, so
	// that the "?" below is the outage's and not a leftover of the start.
	status := ""
	ok, _ := sandbox.Poll(5*time.Second, 200*time.Millisecond, func() (bool, string) {
		status = e.UnitProp(daemonUnit, "StatusText")
		return strings.HasPrefix(status, "down 4/6 workers, 4 pending"), status
	})
	if !ok {
		e.Errorf("STATUS= before the outage is %q, want it to follow the ticks: \"down 4/6 workers, 4 pending\"", status)
	}
	mon := e.watch("down", 200*time.Millisecond)
	back := e.takeDBAway()
	t0 := time.Now()
	e.setDemand(1, 0) // what it will find when it comes back
	ok, _ = sandbox.Poll(5*time.Second, 200*time.Millisecond, func() (bool, string) {
		status = e.UnitProp(daemonUnit, "StatusText")
		return strings.HasPrefix(status, "down 4/6 workers, ?"), status
	})
	if !ok {
		e.Errorf("STATUS= during the outage is %q: the pending count should be shown as ?", status)
	}
	time.Sleep(time.Until(t0.Add(3*window + time.Second)))
	low, high := 4, 4
	for _, s := range mon.between(t0, time.Now()) {
		low, high = min(low, s.live()), max(high, s.live())
	}
	if low != 4 || high != 4 {
		e.Errorf("the pool went between %d and %d workers during the outage, want a hold at 4", low, high)
	}

	back()
	t1 := time.Now()
	var recovered time.Duration
	ok, _ = sandbox.Poll(10*time.Second, 200*time.Millisecond, func() (bool, string) {
		return len(e.Entries("FLEXIQ_POOL=down", "MESSAGE_ID="+msgSourceRecovered)) > 0, ""
	})
	recovered = time.Since(t1)
	if !ok {
		e.Errorf("no SourceRecovered (MESSAGE_ID=%s) in the journal 10 s after the database came back", msgSourceRecovered)
	}
	down := e.waitLiveOrErr("down", 2, window+10*time.Second)
	mon.Stop()
	errs := len(e.Entries("FLEXIQ_POOL=down", "MESSAGE_ID="+msgSourceError))
	e.figure("windows", 3, "window", window, "min_during_outage", low, "max_during_outage", high, "status", fmt.Sprintf("%q", status),
		"recovery_logged_after", recovered, "scaled_to_floor_after", down, "source_error_entries", errs)
}

// A source that returns garbage (negative or text values) or that is locked
// by a writer: the pool holds, even with no scale-down window.
func TestSourceGarbageOrLockedHolds(t *testing.T) {
	e := setup(t, "source-garbage-or-locked")
	e.Configure(e.demandPool("g", "min_workers = 1\nmax_workers = 6\nscale_down_window_sec = 0\n"))
	e.setDemand(3, 0)
	e.StartDaemon()
	e.waitLive("g", 3, 15*time.Second)
	mon := e.watch("g", 200*time.Millisecond)
	const hold = 4 * time.Second
	check := func(what string, t0 time.Time) {
		for _, s := range mon.between(t0, time.Now()) {
			if s.live() != 3 {
				e.Errorf("%s: %d live workers %s in, want a hold at 3: %v", what, s.live(), s.at.Sub(t0).Round(100*time.Millisecond), names(s.units))
				return
			}
		}
	}
	for _, g := range []struct {
		what             string
		pending, running any
	}{
		{"negative pending", -5, 0},
		{"negative running", 0, -7},
		{"text pending", "lots", 0},
		{"NULL running", 3, nil},
	} {
		t0 := time.Now()
		e.setDemand(g.pending, g.running)
		time.Sleep(hold)
		check(g.what, t0)
		st := e.UnitProp(daemonUnit, "StatusText")
		e.setDemand(3, 0)
		time.Sleep(1500 * time.Millisecond)
		e.figure("case", strings.ReplaceAll(g.what, " ", "-"), "held", len(live(e.units("g"))) == 3, "status", fmt.Sprintf("%q", st))
	}

	// Locked: an exclusive lock held by another connection (a writer that
	// holds its transaction, or a VACUUM).
	lock, err := flexiqdb.Create(e.HostDB)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	lock.SetMaxOpenConns(1)
	t0 := time.Now()
	tx, err := lock.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("PRAGMA locking_mode=EXCLUSIVE"); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("UPDATE demand SET pending = 0"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(hold)
	check("locked", t0)
	tx.Rollback()
	lock.Close()
	mon.Stop()
	errs := len(e.Entries("FLEXIQ_POOL=g", "MESSAGE_ID="+msgSourceError))
	e.figure("case", "locked", "held", len(live(e.units("g"))) == 3, "source_error_entries", errs)
}

// A reload during a source outage that raises min_workers, then one that
// lowers max_workers: a hold keeps the pool where it is within its bounds,
// so both apply at once.
func TestReloadBoundsDuringOutage(t *testing.T) {
	e := setup(t, "reload-bounds-during-outage")
	cfg := func(lo, hi int) string {
		return e.demandPool("o", fmt.Sprintf("min_workers = %d\nmax_workers = %d\nscale_down_window_sec = 60\n", lo, hi))
	}
	e.Configure(cfg(1, 10))
	e.setDemand(4, 0)
	e.StartDaemon()
	e.waitLive("o", 4, 15*time.Second)
	back := e.takeDBAway()
	defer back()
	time.Sleep(3 * time.Second) // a few ticks of the hold

	e.Configure(cfg(6, 10))
	e.Reload()
	raised := e.waitLiveOrErr("o", 6, 8*time.Second)
	e.Configure(cfg(1, 2))
	e.Reload()
	lowered := e.waitLiveOrErr("o", 2, 8*time.Second)
	e.figure("min_raised_4_to_6_after", raised, "max_lowered_to_2_after", lowered, "workers_at_end", len(live(e.units("o"))))
}
