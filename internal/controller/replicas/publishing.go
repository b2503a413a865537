package replicas

// Discovery of a service pool's ready replicas (issue 19, items 3 and 4).
// The loop publishes the ready set whenever it may have changed; the
// Publisher writes only what changed. The after-change commands (an nginx
// reload) run off the loop, one batch at a time per pool, and their end
// comes back to the loop as a message, as a source read does: the loop
// answers the operator meanwhile. A ready replica that leaves is first
// taken out of the set; only once a publish without it has succeeded and
// its commands have finished does its drain period begin.

import (
	"slices"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

// Publishing is the loop's record of what it published and of the
// after-change commands in flight.
type Publishing struct {
	pub  *discovery.Publisher
	run  source.CommandRunner
	pool string
	log  *eventlog.Logger
	// key names the last set published without error; a set with the
	// same key is not published again unless Dirty.
	key   string
	Dirty bool // publish at the next chance, even the same set
	// pubGen counts the publishes without error; doneGen is the last of
	// them whose commands have finished. A leaving replica waits for the
	// publish after its retirement.
	pubGen, doneGen uint64
	Busy            bool             // commands in flight
	inflight        discovery.Result // what they follow
	done            chan CommandsDone
	errLog          *eventlog.Throttle
}

// NewPublishing is the publishing of pool, through pub; run runs the
// after-change commands.
func NewPublishing(pool string, pub *discovery.Publisher, run source.CommandRunner, log *eventlog.Logger) *Publishing {
	return &Publishing{pub: pub, run: run, pool: pool, log: log, done: make(chan CommandsDone, 1), errLog: eventlog.NewThrottle(time.Minute)}
}

// Replace takes a new Publisher (a reload changed what it writes); the
// next chance publishes through it.
func (ps *Publishing) Replace(pub *discovery.Publisher) { ps.pub, ps.Dirty = pub, true }

// Done is the channel of the after-change commands' ends.
func (ps *Publishing) Done() chan CommandsDone { return ps.done }

// PubGen is the count of publishes without error; a replica leaving now
// waits for the next one.
func (ps *Publishing) PubGen() uint64 { return ps.pubGen }

// DoneGen is the last publish whose commands have finished.
func (ps *Publishing) DoneGen() uint64 { return ps.doneGen }

// Publish publishes set (named key) if it changed, and starts the
// after-change commands of what it rewrote. While commands run, it only
// notes that a publish is due: their end publishes again. It reports
// whether the leaving replicas' drains may be released now.
func (ps *Publishing) Publish(now time.Time, set discovery.Set, key string) (release bool) {
	if ps.Busy {
		// Only a set other than the one whose commands run is due
		// again: marking every call would rerun a failing command
		// (retried at the next change) as fast as it fails, one
		// transient unit after another, while nothing changed.
		if key != ps.key {
			ps.Dirty = true
		}
		return false
	}
	if !ps.Dirty && key == ps.key && ps.pubGen > 0 {
		// The files are as published and their commands done: a replica
		// that left meanwhile (one that had already left as unready) is in
		// none of them. That counts as a publish without it.
		ps.pubGen++
		ps.doneGen = ps.pubGen
		return true
	}
	res, err := ps.pub.Publish(set)
	if err != nil {
		// Kept running, a leaving replica waits for a publish that works.
		ps.Dirty, ps.key = true, ""
		if log, _ := ps.errLog.Fail(now); log {
			ps.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
				"cannot publish its ready replicas (retried at every tick; leaving replicas wait): %v", err)
		}
	} else {
		ps.errLog.OK()
		ps.Dirty, ps.key = false, key
		ps.pubGen++
	}
	cmds := res.Commands()
	if len(cmds) == 0 {
		if err == nil {
			ps.doneGen = ps.pubGen
		}
		return true
	}
	gen := ps.doneGen
	if err == nil {
		gen = ps.pubGen
	}
	ps.Busy, ps.inflight = true, res
	go RunCommands(ps.run, ps.pool, cmds, gen, ps.done)
	return false
}

// Finished takes the end of a batch of commands, on the loop: the journal
// has their output, and a failed one is retried at the next change. The
// caller then releases the replicas waiting for them, and publishes again
// if Dirty.
func (ps *Publishing) Finished(d CommandsDone) {
	ps.Busy = false
	for _, r := range d.Runs {
		cmd := strings.Join(r.Argv, " ")
		f := eventlog.Fields{"FLEXIQ_COMMAND": cmd}
		if out := strings.TrimSpace(r.Out); out != "" {
			f["FLEXIQ_OUTPUT"] = out
		}
		if r.Err == nil {
			ps.log.Event(eventlog.DiscoveryCommand, eventlog.Info, f, "after-change command %s done in %s", cmd, r.Took.Round(time.Millisecond))
			continue
		}
		f["FLEXIQ_ERROR"] = r.Err.Error()
		ps.log.Event(eventlog.DiscoveryCommand, eventlog.Warning, f, "after-change command %s failed (retried at the next change): %v", cmd, r.Err)
		for _, ch := range ps.inflight.Changed {
			if ch.After != nil && slices.Equal(ch.After.Argv(), r.Argv) {
				ps.pub.Retry(ch.Path)
			}
		}
	}
	ps.inflight = discovery.Result{}
	ps.doneGen = max(ps.doneGen, d.Gen)
}
