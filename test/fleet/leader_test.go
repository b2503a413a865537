package fleet

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/test/harness"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// The burst and the three ways a leader goes: its daemon stopped, killed,
// or paused past its lease.

// burst enqueues the backlog in both queues and checks that the fleet
// converges to the single decision and holds it.
func (c *cluster) burst(t *testing.T) {
	want := expectedTarget(burstJobs)
	enqueued := map[string]time.Time{}
	for _, p := range pools {
		c.enqueue(p.name, burstJobs)
		enqueued[p.name] = time.Now()
	}
	for _, p := range pools {
		if n, err := c.stores.backlog(context.Background(), p.name); err != nil || n != burstJobs {
			t.Fatalf("%s: the queue holds %d jobs (%v), want the %d enqueued", p.name, n, err, burstJobs)
		}
	}
	// Convergence: the first round whose total is the target. Bound: one
	// leader tick to see the backlog and write the plan, one for the
	// followers to read it, and the workers' starts.
	bound := 2*tick + 20*time.Second
	for _, p := range pools {
		var at time.Time
		ok, state := sandbox.Eventually(bound, func() (bool, string) {
			for _, rd := range c.rec.roundsSince(enqueued[p.name]) {
				if rd.total(p.name) >= want {
					at = rd.At
					return true, ""
				}
			}
			rd, _ := c.rec.last(p.name)
			return false, fmt.Sprintf("total %d", rd.total(p.name))
		})
		if !ok {
			t.Errorf("%s: the fleet did not reach its target %d within %s of the burst: %s", p.name, want, bound, state)
			continue
		}
		c.figure(t, p.name, "convergence", "seconds", at.Sub(enqueued[p.name]), "target", want, "jobs", burstJobs, "bound", bound)
	}
	steady := c.settle(t, want, "steady state after the burst")
	time.Sleep(4 * time.Second)
	for _, p := range pools {
		worst, rounds := 0, 0
		for _, rd := range c.rec.roundsSince(steady) {
			worst = max(worst, abs(rd.total(p.name)-want))
			rounds++
		}
		// ±1 per host of the single decision.
		if worst > len(c.hosts) {
			t.Errorf("%s: the fleet total strayed %d from the single decision %d at steady state (±%d allowed)", p.name, worst, want, len(c.hosts))
		}
		_, s := c.rec.last(p.name)
		if s.Target != want {
			t.Errorf("%s: the plan's target is %d, the single decision for %d jobs is %d", p.name, s.Target, burstJobs, want)
		}
		rd, _ := c.rec.last(p.name)
		for _, h := range c.hosts {
			f := rd.Hosts[h.name][p.name].Fleet
			if f == nil || f.Target != want || f.Share != s.Shares[h.id] {
				t.Errorf("%s on %s: status fleet %+v, want target %d and share %d", p.name, h.name, f, want, s.Shares[h.id])
				continue
			}
			// Leader or follower, status shows every host's share,
			// capacity and live count (a follower reads them when asked).
			for _, o := range c.hosts {
				i := slices.IndexFunc(f.Hosts, func(fh api.FleetHost) bool { return fh.ID == o.id })
				if i < 0 || f.Hosts[i].Capacity != o.capacity || f.Hosts[i].Live < 0 || f.Hosts[i].Share != s.Shares[o.id] {
					t.Errorf("%s on %s (leader %v): status's hosts %+v (%q), want %s with share %d, capacity %d and a live count",
						p.name, h.name, f.IsLeader, f.Hosts, f.MembersError, o.name, s.Shares[o.id], o.capacity)
				}
			}
		}
		c.figure(t, p.name, "steady_error", "worst", worst, "target", want, "rounds", rounds, "shares", c.sharesByName(s.Shares))
	}
}

func abs(n int) int { return max(n, -n) }

// sharesByName writes a plan's shares by host name, for the figures.
func (c *cluster) sharesByName(shares map[string]int) string {
	s := ""
	for _, h := range c.hosts {
		if s != "" {
			s += ","
		}
		s += fmt.Sprintf("%s:%d", h.name, shares[h.id])
	}
	return s
}

// eachLeader runs fault once per leading host, until every pool's leader
// has been through it: once if one host leads both pools, twice if not.
// led are the pools that host leads, old their lease's epochs.
func (c *cluster) eachLeader(t *testing.T, fault func(t *testing.T, l *host, led []string, old map[string]uint64)) {
	done := map[string]bool{}
	for _, p := range pools {
		if done[p.name] {
			continue
		}
		l, _ := c.leaderOf(p.name)
		if l == nil {
			t.Fatalf("%s: no leader", p.name)
		}
		var led []string
		old := map[string]uint64{}
		for _, q := range pools {
			if ql, epoch := c.leaderOf(q.name); ql == l && !done[q.name] {
				led, old[q.name], done[q.name] = append(led, q.name), epoch, true
			}
		}
		t.Logf("leader of %v: %s (epochs %v)", led, l.name, old)
		fault(t, l, led, old)
	}
}

// others are the live hosts but h.
func (c *cluster) others(h *host) []*host {
	var hs []*host
	for _, o := range c.live() {
		if o != h {
			hs = append(hs, o)
		}
	}
	return hs
}

// takeover is another host taking a pool's lease.
type takeover struct {
	at  time.Time
	who *host
}

// takeovers waits, for each pool led by l, for another host to take the
// lease at a later epoch, within the TTL and a tick (and leaderSlack) of
// what happened to l at from.
func (c *cluster) takeovers(t *testing.T, l *host, led []string, old map[string]uint64, from time.Time, what string) map[string]takeover {
	t.Helper()
	bound := ttlD + tick + leaderSlack
	got := map[string]takeover{}
	for _, pool := range led {
		at, who, ok := c.newLeader(pool, old[pool], l, from, bound)
		if !ok {
			t.Errorf("%s: no other host took the lease within %s of %s's %s", pool, bound, l.name, what)
			continue
		}
		got[pool] = takeover{at, who}
	}
	return got
}

// leaderStop stops the leader's daemon. A stop hands the host's share to
// the others before it drains its workers (the wiring's semantics: stop
// drains, restart keeps), so the fleet total never drops below what the
// other hosts can hold of the target.
func (c *cluster) leaderStop(t *testing.T) {
	want := expectedTarget(burstJobs)
	c.eachLeader(t, func(t *testing.T, l *host, led []string, old map[string]uint64) {
		from := time.Now()
		if out, err := harness.Exec(l.sb, 2*time.Minute, "systemctl", "stop", daemonUnit); err != nil {
			t.Fatalf("stopping the leader %s: %v\n%s", l.name, err, out)
		}
		stopped := time.Now()
		for pool, f := range c.takeovers(t, l, led, old, from, "stop") {
			c.figure(t, pool, "failover_stop", "seconds_from_stop", f.at.Sub(from), "seconds_from_exit", f.at.Sub(stopped),
				"stop_took", stopped.Sub(from), "old", l.name, "new", f.who.name)
		}
		for _, p := range pools {
			floor := min(want, capacityOf(c.others(l)))
			if low := c.minTotal(p.name, from); low < floor {
				t.Errorf("%s: the fleet total dropped to %d during %s's stop, below %d (the target, or what the other hosts hold)", p.name, low, l.name, floor)
			} else {
				c.figure(t, p.name, "fault_stop", "stopped", l.name, "min_total", low, "floor", floor)
			}
		}
		if out, err := harness.Exec(l.sb, 2*time.Minute, "systemctl", "start", daemonUnit); err != nil {
			t.Fatalf("starting %s again: %v\n%s", l.name, err, out)
		}
		c.settle(t, want, "steady state after "+l.name+"'s restart")
	})
}

// leaderKill SIGKILLs the leader's daemon: its workers stay, systemd
// restarts it, and a leader (any host, the restarted one too) takes the
// lease once it lapses.
func (c *cluster) leaderKill(t *testing.T) {
	want := expectedTarget(burstJobs)
	c.eachLeader(t, func(t *testing.T, l *host, led []string, old map[string]uint64) {
		from := time.Now()
		if out, err := harness.Exec(l.sb, time.Minute, "systemctl", "kill", "-s", "KILL", daemonUnit); err != nil {
			t.Fatalf("killing the leader %s: %v\n%s", l.name, err, out)
		}
		// The killed process writes nothing more: the first plan stored
		// after the kill with a later epoch is a new leader's, whichever
		// host it is on (the restarted daemon too, under the same host id,
		// in a new term). A plan of the old epoch can still land in the
		// milliseconds the kill takes.
		for _, pool := range led {
			bound := ttlD + tick + leaderSlack
			var s stamped
			ok, _ := sandbox.Eventually(bound, func() (bool, string) {
				for _, s = range c.rec.storeSince(pool, from) {
					if s.Err == "" && s.PlanAt.After(from) && s.PlanEpoch > old[pool] && c.byID(s.Holder) != nil {
						return true, ""
					}
				}
				return false, ""
			})
			if !ok {
				t.Errorf("%s: no leader wrote a plan within %s of %s's SIGKILL", pool, bound, l.name)
				continue
			}
			c.figure(t, pool, "failover_kill", "seconds", s.PlanAt.Sub(from), "old", l.name, "new", c.byID(s.Holder).name,
				"old_epoch", old[pool], "new_epoch", s.PlanEpoch, "bound", bound)
		}
		c.settle(t, want, "steady state after "+l.name+"'s SIGKILL")
		for _, p := range pools {
			if low := c.minTotal(p.name, from); low < want {
				t.Errorf("%s: the fleet total dropped to %d after %s's SIGKILL, below the target %d", p.name, low, l.name, want)
			} else {
				c.figure(t, p.name, "fault_kill", "killed", l.name, "min_total", low)
			}
		}
	})
}

// pausedLeader SIGSTOPs the leader past its lease and resumes it: another
// host leads, the paused one never writes a plan with its old epoch, and
// its journal says it lost the lease.
func (c *cluster) pausedLeader(t *testing.T) {
	want := expectedTarget(burstJobs)
	const pause = 9 * time.Second // > the TTL, < the watchdog (30 s)
	c.eachLeader(t, func(t *testing.T, l *host, led []string, old map[string]uint64) {
		pid, err := l.mainPID()
		if err != nil || pid == 0 {
			t.Fatalf("%s: the daemon's MainPID: %d %v", l.name, pid, err)
		}
		from := time.Now()
		if out, err := harness.Exec(l.sb, time.Minute, "kill", "-STOP", strconv.Itoa(pid)); err != nil {
			t.Fatalf("SIGSTOP: %v\n%s", err, out)
		}
		paused := true
		defer func() {
			if paused {
				harness.Exec(l.sb, time.Minute, "kill", "-CONT", strconv.Itoa(pid))
			}
		}()
		taken := c.takeovers(t, l, led, old, from, "SIGSTOP")
		for pool, f := range taken {
			c.figure(t, pool, "failover_pause", "seconds", f.at.Sub(from), "old", l.name, "new", f.who.name)
		}
		time.Sleep(time.Until(from.Add(pause)))
		back := c.beforeRejoin(t, l)
		if out, err := harness.Exec(l.sb, time.Minute, "kill", "-CONT", strconv.Itoa(pid)); err != nil {
			t.Fatalf("SIGCONT: %v\n%s", err, out)
		}
		paused = false
		c.settle(t, want, "steady state after "+l.name+"'s pause")
		c.afterRejoin(t, back, "pause")
		for _, pool := range led {
			c.checkFenced(t, l, pool, old[pool], from, taken[pool].at)
		}
		// The paused daemon's workers run on: the others' takeover of its
		// share once it is gone adds to them, and the fleet comes back
		// down to the target after the SIGCONT, never below it.
		for _, p := range pools {
			low, high := c.minTotal(p.name, from), 0
			for _, rd := range c.rec.roundsSince(from) {
				high = max(high, rd.total(p.name))
			}
			if low < want {
				t.Errorf("%s: the fleet total dropped to %d around %s's pause, below the target %d", p.name, low, l.name, want)
			}
			c.figure(t, p.name, "fault_pause_total", "paused", l.name, "min_total", low, "max_total", high)
		}
	})
}

// checkFenced checks that no plan of the old epoch (or older) was stored
// once another host led, and that the paused host's journal says it lost
// the lease.
func (c *cluster) checkFenced(t *testing.T, l *host, pool string, old uint64, from, taken time.Time) {
	t.Helper()
	if taken.IsZero() {
		return
	}
	// Until the new leader's first plan, the store still holds the
	// paused one's last; from then on, never again.
	var newEpoch uint64
	stale := 0
	for _, s := range c.rec.storeSince(pool, taken) {
		switch {
		case s.Err != "" || s.PlanEpoch == 0:
		case newEpoch == 0 && s.PlanEpoch > old:
			newEpoch = s.PlanEpoch
		case newEpoch != 0 && s.PlanEpoch <= old:
			stale++
		}
	}
	if newEpoch == 0 {
		t.Errorf("%s: no plan of an epoch above %d (the paused leader's) was stored after another host took the lease", pool, old)
	}
	if stale > 0 {
		t.Errorf("%s: %d store samples after the new leader's first plan hold a plan of epoch <= %d, the paused leader's", pool, stale, old)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	entries, err := l.sb.Journal(ctx, "MESSAGE_ID="+string(eventlog.FleetLeaderLost), "FLEXIQ_POOL="+pool, fmt.Sprintf("--since=@%d", from.Unix()-1))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) == 0 {
		t.Errorf("%s: the paused leader %s's journal has no leader-lost event", pool, l.name)
		return
	}
	c.figure(t, pool, "fault_pause", "paused", l.name, "old_epoch", old, "new_epoch", newEpoch, "stale_plans", stale,
		"lost_reason", entries[0].Field("FLEXIQ_REASON"))
}
