// Package coord is the per-pool coordination loop of fleet mode (issue 20,
// "One leader per pool, elected by a lease in the store", "The leader
// decides once, for the fleet", "When the plan goes stale", "Handover"):
// the order of calls that internal/fleet's plan.go lays out, run against a
// fleet.Store, with the lease's renewal and jitter, stepping down, the
// staleness rules, resignation, the journal's events and the store calls
// counted per tick.
//
// It is a package of its own, not files in internal/fleet, because fleet is
// the pure planner (no I/O, no clock, no goroutine), and this is the part
// with all three; keeping them apart keeps fleet's tests pure and lets the
// daemon import the loop without the planner growing a dependency on
// context deadlines and timers.
//
// # The tick
//
// Step runs one tick, at the heartbeat interval (Config.Interval, which is
// also the leader's decision tick):
//
//	every host   Heartbeat(own Member, from Deps.Self)                  1 call
//	             Acquire, when due (below)              about 1 per Config.Renew
//	the leader   ReadPlan once, at its acquisition (the old windows)
//	             Members, Deps.Source (the source read once), fleet.Decide
//	             WritePlan fenced by its epoch, EVERY tick             2 calls
//	a follower   ReadPlan, fed to fleet.View                            1 call
//	             Members, only while it holds no plan at all (to count
//	             the hosts for its share of min_workers)
//	every host   fleet.View.Target -> Status.Target, published
//
// So a follower makes 2 store calls a tick, the leader 3, plus one Acquire
// per renewal on every host, whatever the fleet's size (Status.Calls
// counts them). Acquires happen at ticks, so at the defaults (tick 3 s,
// renewal 5 s) a renewal falls every second tick: 2.5 calls a tick for a
// follower, 3.5 for the leader, at 3 hosts and at 100 (TestCallsPerTick
// measures it: go test -run CallsPerTick -v ./internal/fleet/coord). A
// leader whose renewal fails tries again at the next tick.
//
// Acquire is due for the leader every Config.Renew (jittered by
// Config.Jitter through Deps.Rand); for a follower at the same cadence and
// also as soon as the lease it last saw has expired (on the store's clock,
// estimated from the skew measured at its last read), the plan it holds is
// older than the TTL, or Wake was called (a "released" notification: the
// Redis store's Released channel, the Postgres store's Listener). A
// follower passes the highest epoch it knows (fleet.View.Highest), the
// leader its own.
//
// The leader steps down at once, and never writes again with that epoch,
// when: WritePlan says fleet.ErrFenced; a renewal is refused (another host
// holds the lease: reason fenced); its own clock says the TTL has passed
// since it sent its last successful renewal (reason expired: a paused
// process, an unreachable store); or Resign (reason resigned). A store that
// does not answer is not a loss by itself: the leader keeps leading until
// its lease lapses on its own clock, counted from when the renewal was
// sent, never from when the answer came.
//
// # The single-owner model
//
// A Coordinator's state belongs to one goroutine: the one that calls Step
// and Resign (Run's, while it runs). Everything else reads the published
// Status (Snapshot, lock-free) and may wait on Changed; Wake is the only
// method safe to call from anywhere. The pool's loop (internal/controller)
// will read Snapshot().Target at its tick, as it reads its own decision
// today, and Changed can be one more case in its select.
//
// # Where it runs
//
// internal/controller runs one Coordinator per pool that joins a fleet
// (its fleet decider, internal/controller/decide/fleetlink.go): Run in a
// goroutine of its own beside the pool's loop,
// Self from the pool's published numbers, Source reading the pool's
// source (the leader only), Wake from the store's release notifications,
// Changed kicking the pool's tick, SetPipeline at a reload, Resign when the
// daemon stops or restarts. The pool applies Snapshot().Target.
package coord
