package main

import (
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
	"github.com/flexiq/flexiq-scaled/internal/simulate"
)

// fleetFlags are simulate's fleet mode (issue 20): the trace as one queue
// shared by several hosts under one leader.
type fleetFlags struct {
	hosts     *string
	fail      *string
	ttl       *time.Duration
	heartbeat *time.Duration
}

func addFleetFlags(fs *flag.FlagSet) fleetFlags {
	return fleetFlags{
		hosts:     fs.String("fleet", "", "replay the trace through a fleet of `HOSTS`, as ID=CAPACITY,... (the pool's min and max are the fleet's)"),
		fail:      fs.String("fleet-fail", "", "power off a host at a time of the trace, as `HOST@SECONDS`, or kill its daemon for DOWN seconds, as HOST@SECONDS+DOWN; HOST may be \"leader\""),
		ttl:       fs.Duration("fleet-ttl", fleet.DefaultTTL, "the leader's lease `TTL`"),
		heartbeat: fs.Duration("fleet-heartbeat", fleet.DefaultHeartbeat, "the hosts' heartbeat `INTERVAL` (a host silent for 3 is gone)"),
	}
}

func (f fleetFlags) set() bool { return *f.hosts != "" }

// options checks the flags, given the other mode flags, and returns the
// fleet's options (none unless --fleet).
func (f fleetFlags) options(trace, workload string) (simulate.FleetOptions, error) {
	switch {
	case !f.set() && *f.fail != "":
		return simulate.FleetOptions{}, fmt.Errorf("--fleet-fail needs --fleet")
	case !f.set():
		return simulate.FleetOptions{}, nil
	case workload != "":
		return simulate.FleetOptions{}, fmt.Errorf("--fleet and --workload exclude each other")
	case trace == "":
		return simulate.FleetOptions{}, fmt.Errorf("--fleet needs --trace")
	case *f.ttl <= 0 || *f.heartbeat <= 0:
		return simulate.FleetOptions{}, fmt.Errorf("--fleet-ttl and --fleet-heartbeat must be positive")
	}
	hosts, err := simulate.ParseFleetHosts(*f.hosts)
	if err != nil {
		return simulate.FleetOptions{}, err
	}
	opt := simulate.FleetOptions{Hosts: hosts, TTL: *f.ttl, Heartbeat: *f.heartbeat}
	if *f.fail != "" {
		if opt.Fail, opt.FailAt, opt.Down, err = simulate.ParseFleetFail(*f.fail); err != nil {
			return opt, err
		}
	}
	return opt, nil
}

func runFleet(pool *config.Pool, opt simulate.FleetOptions, trace io.Reader, tracePath, format string, stdout, stderr io.Writer) int {
	if err := simulate.RunFleet(pool, trace, opt, format, stdout); err != nil {
		return failf(stderr, "simulate", "pool %s, fleet, trace %s: %v", pool.Name, tracePath, err)
	}
	return exitOK
}

const fleetHelp = `

With --fleet, the trace is one queue shared by a fleet of hosts (issue 20):
a leader elected by a simulated lease reads it once per row, decides for the
fleet with the pool's policy (min_workers and max_workers are the fleet's),
and splits the target across the live hosts in proportion to capacity; each
host applies its share as the daemon would, holding it when the plan goes
stale. --fleet-fail HOST@SECONDS powers a host (or the leader) off at a
time of the trace: its workers and heartbeats stop, its lease expires after
the TTL; HOST@SECONDS+DOWN kills its daemon for DOWN seconds instead: its
workers keep running, and it comes back without its lease.
Output, one line per row: t, pending, leader, epoch, target, plan_age, live
(the fleet's), and each host's capacity, share, live count and phase
(fresh, joining, hold, fallback, none).`
