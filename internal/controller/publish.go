package controller

// Discovery of a service pool's ready replicas (issue 19, items 3 and 4).
// The loop publishes the ready set whenever it may have changed; the
// Publisher writes only what changed. The after-change commands (an nginx
// reload) run off the loop, one batch at a time per pool, and their end
// comes back to the loop as a message, as a source read does: the loop
// answers the operator meanwhile. A ready replica that leaves is first
// taken out of the set; only once a publish without it has succeeded and
// its commands have finished does its drain period begin (quiet.go holds
// it meanwhile, persisted, so that a restart neither re-adds nor stops it
// early).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/discovery"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// publishing is the loop's record of what it published and of the
// after-change commands in flight.
type publishing struct {
	pub *discovery.Publisher
	// key names the last set published without error; a set with the
	// same key is not published again unless dirty.
	key   string
	dirty bool // publish at the next chance, even the same set
	// pubGen counts the publishes without error; doneGen is the last of
	// them whose commands have finished. A leaving replica waits for the
	// publish after its retirement (quietUnit.awaitGen).
	pubGen, doneGen uint64
	busy            bool             // commands in flight
	inflight        discovery.Result // what they follow
	done            chan commandsDone
	errLog          *eventlog.Throttle
}

func newPublishing(pub *discovery.Publisher) publishing {
	return publishing{pub: pub, done: make(chan commandsDone, 1), errLog: eventlog.NewThrottle(time.Minute)}
}

func newPublisher(cfg *config.Pool) (*discovery.Publisher, error) {
	pub, err := discovery.NewPublisher(discovery.Options{
		Pool: cfg.Name, Dir: cfg.Service.DiscoveryDir, MetricsPort: cfg.Service.MetricsPort, Templates: cfg.Service.Templates,
		Wake: cfg.Service.Wake.Listen,
	})
	if err != nil {
		return nil, fmt.Errorf("pool %s: discovery: %w", cfg.Name, err)
	}
	return pub, nil
}

// commandRun is one after-change command's run.
type commandRun struct {
	argv []string
	out  string
	err  error
	took time.Duration
}

// commandsDone is the end of one batch of after-change commands.
type commandsDone struct {
	gen  uint64
	runs []commandRun
}

// readySet is the pool's ready replicas as discovery shows them.
func (ws *workers) readySet() (discovery.Set, string) {
	addr := serviceAddress(ws.cfg.Service)
	var reps []discovery.Replica
	var key strings.Builder
	for _, w := range ws.fleet.liveWorkers() {
		if w.rd != repReady {
			continue
		}
		reps = append(reps, discovery.Replica{Slot: w.slot, Unit: w.unit, Address: addr, Ports: w.ports})
		fmt.Fprintf(&key, "%d %s %v;", w.slot, w.unit, w.ports)
		// A gang group's other ranks: in the JSON file and .Replicas
		// with their rank, never in file_sd or .Leaders (rank 0 is the
		// replica).
		for i, rp := range w.rankPorts {
			unit := units.RankUnitName(ws.name, w.slot, i+1)
			reps = append(reps, discovery.Replica{Slot: w.slot, Unit: unit, Address: addr, Ports: rp, Rank: i + 1})
			fmt.Fprintf(&key, "%d %s %v;", w.slot, unit, rp)
		}
	}
	return discovery.NewSet(ws.name, reps), addr + "|" + key.String()
}

// publishReady publishes the ready set if it changed, and starts the
// after-change commands of what it rewrote. While commands run, it only
// notes that a publish is due: their end publishes again.
func (ws *workers) publishReady(ctx context.Context, now time.Time) {
	if ws.svc == nil || ws.dryRun() {
		return
	}
	ws.armNotify()
	ps := &ws.svc.pubs
	set, key := ws.readySet()
	if ps.busy {
		// Only a set other than the one whose commands run is due
		// again: marking every call would rerun a failing command
		// (retried at the next change) as fast as it fails, one
		// transient unit after another, while nothing changed.
		if key != ps.key {
			ps.dirty = true
		}
		return
	}
	if !ps.dirty && key == ps.key && ps.pubGen > 0 {
		// The files are as published and their commands done: a replica
		// that left meanwhile (one that had already left as unready) is in
		// none of them. That counts as a publish without it.
		ps.pubGen++
		ps.doneGen = ps.pubGen
		ws.releaseDrains(ctx, now)
		return
	}
	res, err := ps.pub.Publish(set)
	if err != nil {
		// Kept running, a leaving replica waits for a publish that works.
		ps.dirty, ps.key = true, ""
		if log, _ := ps.errLog.Fail(now); log {
			ws.log.Event(eventlog.Lifecycle, eventlog.Warning, eventlog.Fields{"FLEXIQ_ERROR": err.Error()},
				"cannot publish its ready replicas (retried at every tick; leaving replicas wait): %v", err)
		}
	} else {
		ps.errLog.OK()
		ps.dirty, ps.key = false, key
		ps.pubGen++
	}
	cmds := res.Commands()
	if len(cmds) == 0 {
		if err == nil {
			ps.doneGen = ps.pubGen
		}
		ws.releaseDrains(ctx, now)
		return
	}
	gen := ps.doneGen
	if err == nil {
		gen = ps.pubGen
	}
	ps.busy, ps.inflight = true, res
	go runCommands(ws.svc.run, ws.name, cmds, gen, ps.done)
}

// runCommands runs a batch of after-change commands in order, each within
// its timeout, off the loop; it touches nothing of the pool and hands its
// end to the loop through done (buffered: one batch at a time).
func runCommands(run source.CommandRunner, pool string, cmds []discovery.Command, gen uint64, done chan<- commandsDone) {
	d := commandsDone{gen: gen}
	for _, c := range cmds {
		ctx, cancel := context.WithTimeout(context.Background(), c.Timeout)
		out := &cappedBuffer{max: 4 << 10}
		start := time.Now()
		err := run.RunCommand(ctx, c.Argv(), []string{"FLEXIQ_POOL=" + pool}, out, out)
		if err != nil && ctx.Err() != nil {
			err = fmt.Errorf("timed out after %s: %w", c.Timeout, err)
		}
		cancel()
		d.runs = append(d.runs, commandRun{argv: c.Argv(), out: out.String(), err: err, took: time.Since(start)})
	}
	done <- d
}

// commandsFinished takes the end of a batch of commands, on the loop: the
// journal has their output, a failed one is retried at the next change,
// the replicas waiting for them begin their drain periods, and a publish
// that came due meanwhile is made.
func (ws *workers) commandsFinished(ctx context.Context, now time.Time, d commandsDone) {
	ps := &ws.svc.pubs
	ps.busy = false
	for _, r := range d.runs {
		cmd := strings.Join(r.argv, " ")
		f := eventlog.Fields{"FLEXIQ_COMMAND": cmd}
		if out := strings.TrimSpace(r.out); out != "" {
			f["FLEXIQ_OUTPUT"] = out
		}
		if r.err == nil {
			ws.log.Event(eventlog.DiscoveryCommand, eventlog.Info, f, "after-change command %s done in %s", cmd, r.took.Round(time.Millisecond))
			continue
		}
		f["FLEXIQ_ERROR"] = r.err.Error()
		ws.log.Event(eventlog.DiscoveryCommand, eventlog.Warning, f, "after-change command %s failed (retried at the next change): %v", cmd, r.err)
		for _, ch := range ps.inflight.Changed {
			if ch.After != nil && slices.Equal(ch.After.Argv(), r.argv) {
				ps.pub.Retry(ch.Path)
			}
		}
	}
	ps.inflight = discovery.Result{}
	ps.doneGen = max(ps.doneGen, d.gen)
	ws.releaseDrains(ctx, now)
	if ps.dirty {
		ws.publishReady(ctx, now)
	}
}

// pumpService takes the service's messages that are waiting, without
// blocking: for the owner when no loop runs (Tick, Drain).
func (ws *workers) pumpService(ctx context.Context, now time.Time) {
	if ws.svc == nil {
		return
	}
	for {
		select {
		case t, ok := <-ws.svc.transitions():
			if !ok {
				return
			}
			ws.onTransition(t)
		case d := <-ws.svc.pubs.done:
			ws.commandsFinished(ctx, now, d)
		case <-ws.svc.relist:
			ws.checkNotify(ctx)
		default:
			return
		}
	}
}

// retireReplica takes a live replica out of service. One that was never
// ready was in no discovery file: it is stopped at once. One that was
// leaves discovery first (if it is still there), and is held draining, as
// a quiet worker is, until the publish without it and its commands are
// done, and then its drain period: a proxy may still send it a request it
// took before its reload.
func (ws *workers) retireReplica(ctx context.Context, now time.Time, w *worker, why string) bool {
	if ws.dryRun() {
		return false
	}
	if !w.everReady {
		return ws.stopWorker(ctx, w, why)
	}
	ws.untrack(w)
	ws.fleet.stop(w)
	svc := ws.cfg.Service
	// Until its commands are done the deadline is an upper bound, what a
	// restart of the daemon meanwhile goes by.
	q := &quietUnit{slot: w.slot, invocation: w.invocation, deadline: now.Add(svc.DrainPeriod + ws.commandBound()),
		awaitGen: ws.svc.pubs.pubGen + 1}
	ws.addQuiet(now, w.unit, q)
	ws.saveQuiet()
	ws.report.draining(w.slot, w.unit, fmt.Sprintf("%s: leaves discovery, then serves out a drain period of %s", why, svc.DrainPeriod))
	return true
}

// commandBound is the longest a batch of after-change commands may take.
func (ws *workers) commandBound() time.Duration {
	var d time.Duration
	for _, t := range ws.cfg.Service.Templates {
		if a := t.Spec.After; a != nil {
			d += a.Timeout
		}
	}
	return d
}

// releaseDrains begins the drain period of every leaving replica whose
// publish and commands are done.
func (ws *workers) releaseDrains(ctx context.Context, now time.Time) {
	released := false
	for _, unit := range sortedKeys(ws.quiet) {
		q := ws.quiet[unit]
		if q.awaitGen == 0 || q.awaitGen > ws.svc.pubs.doneGen {
			continue
		}
		q.awaitGen = 0
		q.timer.Stop()
		q.deadline = now.Add(ws.cfg.Service.DrainPeriod)
		ws.addQuiet(now, unit, q)
		released = true
		ws.log.Event(eventlog.WorkerDraining, eventlog.Info, ws.workerFields(q.slot, unit, nil),
			"%s is out of discovery: its drain period of %s begins", unit, ws.cfg.Service.DrainPeriod)
		if sig := ws.cfg.QuietSignalNumber; sig != 0 {
			ws.drainSignal(ctx, q.slot, unit, sig)
		}
	}
	if released {
		ws.saveQuiet()
		ws.quietStep(ctx, now)
	}
}

// drainSignal sends a leaving replica's quiet_signal as its drain period
// begins, off the loop (acting.go); a failure is only logged.
func (ws *workers) drainSignal(ctx context.Context, slot int, unit string, sig int) {
	name := ws.cfg.QuietSignal
	ws.callJob(ctx, jobOther, killMain(unit, sig), func(err error) {
		if err != nil {
			ws.log.Event(eventlog.WorkerDraining, eventlog.Warning, ws.workerFields(slot, unit, eventlog.Fields{"FLEXIQ_ERROR": err.Error()}),
				"cannot send %s to %s: %v", name, unit, err)
		}
	})
}

// cappedBuffer keeps the first max bytes written to it, from the
// command's two pipes at once.
type cappedBuffer struct {
	mu  sync.Mutex
	b   []byte
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.b); room > 0 {
		c.b = append(c.b, p[:min(len(p), room)]...)
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.b)
}

// svcDone is the channel of the after-change commands' ends, nil for a
// queue pool.
func (ws *workers) svcDone() <-chan commandsDone {
	if ws.svc == nil {
		return nil
	}
	return ws.svc.pubs.done
}
