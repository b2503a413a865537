package main

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	sddbus "github.com/coreos/go-systemd/v22/dbus"

	"github.com/flexiq/flexiq-scaled/internal/flexiqdb"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

// decisionID is the MESSAGE_ID of the daemon's scaling decisions
// (eventlog.Decision); the demo reads them as any admin would.
const decisionID = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01"

// result is what the replay measured.
type result struct {
	total, done, failed int64
	waits               flexiqdb.WaitStats
	// workerSeconds integrates the pool's running worker units (live and
	// draining: both hold a process) over the replay, sampled every second.
	workerSeconds float64
	elapsed       time.Duration // from the first tick to the last sample
	ups, downs    int
	peak          int
	drained       bool // back at min_workers with every job done
}

// workers is the pool's worker units by state.
type workers struct {
	live     int // active or activating: what the daemon counts as current
	draining int // deactivating: told to stop, finishing its jobs
}

func countWorkers(ctx context.Context, conn *sddbus.Conn) (workers, error) {
	units, err := conn.ListUnitsByPatternsContext(ctx, nil, []string{"flexiq-" + poolName + "@*.service"})
	if err != nil {
		return workers{}, fmt.Errorf("listing the pool's units: %w", err)
	}
	var w workers
	for _, u := range units {
		switch u.ActiveState {
		case "active", "activating", "reloading":
			w.live++
		case "deactivating":
			w.draining++
		}
	}
	return w, nil
}

// planned is one job of the replay: when it arrives, relative to the start,
// and how long the worker spends on it.
type planned struct {
	at time.Duration
	ms int
}

// replay feeds the trace into the database on its compressed schedule and
// prints one timeline line per second until the queue has drained and the
// pool is back at min_workers (or the tail runs out).
func (d *demo) replay(ctx context.Context, db *sql.DB) (*result, error) {
	r := d.s.replay
	plan := make([]planned, len(d.trace))
	for i, a := range d.trace {
		plan[i] = planned{at: r.Offset(d.trace, a), ms: r.ServiceMs(a)}
	}
	last := plan[len(plan)-1].at

	conn, err := d.sb.Bus(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	t := &timeline{d: d, db: db, conn: conn, cursor: d.journalEnd(ctx), res: &result{total: int64(len(plan))}}

	d.logf("replaying %d jobs over %s; one line per second (decision: the daemon's, from its journal)", len(plan), last.Round(time.Second))
	fmt.Fprintln(d.out)
	fmt.Fprintf(d.out, "%5s  %8s  %7s  %7s  %7s  %6s  %-*s  %s\n",
		"time", "trace", "arrived", "pending", "running", "done", 3+d.s.pool.MaxWorkers, "workers", "decision")

	t.start = time.Now()
	enqErr := make(chan error, 1)
	ectx, cancelEnqueue := context.WithCancel(ctx)
	defer cancelEnqueue()
	go func() { enqErr <- enqueue(ectx, db, plan, t.start, &t.arrived) }()

	t.prevAt = t.start
	for sec := 1; ; sec++ {
		// Sample on the second, whatever else happens meanwhile.
		if err := waitUntil(ctx, t.start.Add(time.Duration(sec)*time.Second), &enqErr); err != nil {
			return nil, err
		}
		s, err := t.sample(ctx)
		if err != nil {
			return nil, err
		}
		t.record(ctx, s)
		if s.elapsed > last && s.done+s.failed == t.res.total && s.running == 0 &&
			s.w.live == d.s.pool.MinWorkers && s.w.draining == 0 {
			t.res.drained = true
			break
		}
		if s.elapsed > last+d.s.tail {
			break
		}
	}
	fmt.Fprintln(d.out)
	if t.peakStatus != "" {
		d.logf("at the peak, %s into the replay, `flexiq-scaled status %s` said:", clock(t.peakAt), poolName)
		fmt.Fprintf(d.out, "\n%s\n", strings.TrimRight(t.peakStatus, "\n"))
	}

	res := t.res
	if res.waits, err = flexiqdb.Waits(db); err != nil {
		return res, err
	}
	return res, d.check(ctx, res)
}

// journalEnd is the cursor of the newest journal entry ("" if none can be
// read): only decisions taken from now on count.
func (d *demo) journalEnd(ctx context.Context) string {
	if es, err := d.sb.Journal(ctx, "-n", "1"); err == nil && len(es) > 0 {
		return es[0].Field("__CURSOR")
	}
	return ""
}

// waitUntil waits for the time at, or until ctx ends or the enqueuing
// fails; *enqErr becomes nil once everything is enqueued.
func waitUntil(ctx context.Context, at time.Time, enqErr *chan error) error {
	for tick := time.After(time.Until(at)); tick != nil; {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-*enqErr:
			if err != nil {
				return err
			}
			*enqErr = nil // all enqueued; a nil channel never fires again
		case <-tick:
			tick = nil
		}
	}
	return nil
}

// timeline is the replay's state from one second's line to the next.
type timeline struct {
	d       *demo
	db      *sql.DB
	conn    *sddbus.Conn
	cursor  string // the journal's, past the decisions already shown
	start   time.Time
	arrived atomic.Int64 // jobs enqueued so far
	res     *result

	prevArrived int64
	prevAt      time.Time
	// The operator's view at the pool's peak, the most telling moment:
	// flexiq-scaled status, run inside at each new peak, the last shown.
	peakShown  int
	peakStatus string
	peakAt     time.Duration
}

// sample is one second's reading of the queue, the units and the journal.
type sample struct {
	now                            time.Time
	elapsed                        time.Duration
	pending, running, done, failed int64
	w                              workers
	decisions                      []sandbox.JournalEntry
}

func (t *timeline) sample(ctx context.Context) (sample, error) {
	s := sample{now: time.Now()}
	s.elapsed = s.now.Sub(t.start)
	var err1, err2, err3, err4, err5, err6 error
	s.pending, err1 = flexiqdb.Count(t.db, flexiqdb.StatusPending)
	s.running, err2 = flexiqdb.Count(t.db, flexiqdb.StatusRunning)
	s.done, err3 = flexiqdb.Count(t.db, flexiqdb.StatusComplete)
	s.failed, err4 = flexiqdb.Count(t.db, flexiqdb.StatusFailed)
	s.w, err5 = countWorkers(ctx, t.conn)
	s.decisions, err6 = t.d.decisions(ctx, &t.cursor)
	if err := firstErr(err1, err2, err3, err4, err5, err6); err != nil {
		if ctx.Err() != nil {
			return s, ctx.Err()
		}
		return s, err
	}
	return s, nil
}

// record adds the sample to the result and prints its timeline line; at a
// new peak it keeps what flexiq-scaled status says.
func (t *timeline) record(ctx context.Context, s sample) {
	d, res := t.d, t.res
	res.workerSeconds += float64(s.w.live+s.w.draining) * s.now.Sub(t.prevAt).Seconds()
	res.peak = max(res.peak, s.w.live)
	res.done, res.failed, res.elapsed = s.done, s.failed, s.elapsed
	var what []string
	for _, e := range s.decisions {
		switch e.Field("FLEXIQ_ACTION") {
		case "scale-up":
			res.ups++
		case "scale-down":
			res.downs++
		}
		what = append(what, describe(e))
	}
	n := t.arrived.Load()
	fmt.Fprintf(d.out, "%5s  %8s  %7d  %7d  %7d  %6d  %2d %-*s  %s\n",
		clock(s.elapsed), d.s.replay.TraceTime(d.trace, s.elapsed).Format("15:04:05"),
		n-t.prevArrived, s.pending, s.running, s.done, s.w.live, d.s.pool.MaxWorkers, bar(s.w, d.s.pool.MaxWorkers),
		strings.Join(what, "; "))
	t.prevArrived, t.prevAt = n, s.now
	if s.w.live > t.peakShown {
		if out, err := d.sb.Exec(ctx, "flexiq-scaled", "status", poolName); err == nil {
			t.peakStatus, t.peakAt = out, s.elapsed
		}
		t.peakShown = s.w.live
	}
}

// check turns a run that showed nothing into a failure, with the daemon's
// own account of what it did attached.
func (d *demo) check(ctx context.Context, res *result) error {
	var problems []string
	if res.done == 0 {
		problems = append(problems, "no job completed")
	}
	if res.ups == 0 {
		problems = append(problems, "the daemon never scaled the pool up")
	}
	if res.downs == 0 {
		problems = append(problems, "the daemon never scaled the pool down")
	}
	if left := res.total - res.done - res.failed; left > 0 {
		problems = append(problems, fmt.Sprintf("%d jobs were still not done %s after the last arrival", left, d.s.tail))
	}
	if res.failed > 0 {
		problems = append(problems, fmt.Sprintf("%d jobs failed", res.failed))
	}
	if len(problems) == 0 {
		if !res.drained {
			d.logf("note: the pool was not back at %d worker(s) %s after the last arrival", d.s.pool.MinWorkers, d.s.tail)
		}
		return nil
	}
	out, _ := d.sb.Exec(ctx, "journalctl", "--no-pager", "-n", "40", "-o", "short-monotonic", "-u", daemonUnit)
	return &failure{why: strings.Join(problems, "; ") + "\nthe daemon's journal, last 40 lines:\n" + out}
}

// decisions returns the pool's scaling decisions logged after *cursor, and
// moves the cursor past them.
func (d *demo) decisions(ctx context.Context, cursor *string) ([]sandbox.JournalEntry, error) {
	args := []string{"-u", daemonUnit, "MESSAGE_ID=" + decisionID, "FLEXIQ_POOL=" + poolName}
	if *cursor != "" {
		args = append(args, "--after-cursor="+*cursor)
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	es, err := d.sb.Journal(qctx, args...)
	if err != nil {
		return nil, err
	}
	if len(es) > 0 {
		*cursor = es[len(es)-1].Field("__CURSOR")
	}
	return es, nil
}

// describe renders one decision, with what the daemon saw when it took it.
func describe(e sandbox.JournalEntry) string {
	act, cur, des := e.Field("FLEXIQ_ACTION"), e.Field("FLEXIQ_CURRENT"), e.Field("FLEXIQ_DESIRED")
	saw := fmt.Sprintf("(%s pending, %s running)", e.Field("FLEXIQ_PENDING"), e.Field("FLEXIQ_RUNNING"))
	switch act {
	case "scale-up", "scale-down":
		return fmt.Sprintf("%-10s %s -> %s %s", act, cur, des, saw)
	default:
		return fmt.Sprintf("%-10s at %s", act, des)
	}
}

// enqueue inserts each planned job once its time has come, in small
// batches, with scheduled_at set to its exact arrival so that measured waits
// do not depend on the batching.
func enqueue(ctx context.Context, db *sql.DB, plan []planned, start time.Time, arrived *atomic.Int64) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < len(plan); {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		elapsed := time.Since(start)
		var batch []flexiqdb.Job
		for ; i < len(plan) && plan[i].at <= elapsed; i++ {
			batch = append(batch, flexiqdb.Job{ScheduledAt: start.Add(plan[i].at), DurationMs: plan[i].ms})
		}
		if len(batch) == 0 {
			continue
		}
		if err := flexiqdb.EnqueueMany(db, batch); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		arrived.Add(int64(len(batch)))
	}
	return nil
}

// bar draws the pool: # per live worker, ~ per draining one, . up to max.
func bar(w workers, maxWorkers int) string {
	s := strings.Repeat("#", w.live) + strings.Repeat("~", w.draining)
	if n := maxWorkers - w.live - w.draining; n > 0 {
		s += strings.Repeat(".", n)
	}
	return s
}

// clock renders d as m:ss.
func clock(d time.Duration) string {
	s := int(d.Round(time.Second).Seconds())
	return fmt.Sprintf("%d:%02d", s/60, s%60)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// percentile is the nearest-rank percentile of xs (p in (0, 1]).
func percentile(xs []int, p float64) int {
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p*float64(len(s)))) - 1
	return s[max(i, 0)]
}

// summary prints the outcome, ending with one quotable `summary:` line.
func (d *demo) summary(res *result) {
	r, p := d.s.replay, d.s.pool
	secs := func(t time.Duration) string { return fmt.Sprintf("%.2fs", t.Seconds()) }
	fixed := float64(p.MaxWorkers) * res.elapsed.Seconds()
	fmt.Fprintf(d.out, "\nSummary (wall time; the trace played %gx faster)\n", r.Speedup)
	fmt.Fprintf(d.out, "  jobs          %d of %d done, %d failed\n", res.done, res.total, res.failed)
	fmt.Fprintf(d.out, "  wait          p50 %s, p95 %s, max %s (started_at - scheduled_at; %gx that in trace time)\n",
		secs(res.waits.P50), secs(res.waits.P95), secs(res.waits.Max), r.Speedup)
	fmt.Fprintf(d.out, "  workers       peak %d; %.0f worker-seconds in %s, where a fixed pool of %d would use %.0f (%.0f%% less)\n",
		res.peak, res.workerSeconds, res.elapsed.Round(time.Second), p.MaxWorkers, fixed, 100*(1-res.workerSeconds/fixed))
	fmt.Fprintf(d.out, "  scale events  %d scale-ups, %d scale-downs (journalctl -u %s MESSAGE_ID=%s)\n",
		res.ups, res.downs, daemonUnit, decisionID)
	from := "bin/ and systemd/ (by hand)"
	if d.s.deb != "" {
		from = relTo(d.root, d.s.deb)
	}
	fmt.Fprintf(d.out, "  daemon        %s, installed from %s\n", d.daemonVersion, from)
	fmt.Fprintf(d.out, "  total         %s for this program (sandbox boot, install, replay, teardown)\n\n",
		time.Since(d.start).Round(time.Second))
	fmt.Fprintf(d.out, "summary: %d/%d jobs done, p95 wait %s, %.0f worker-seconds (fixed pool of %d: %.0f), %d scale-ups, %d scale-downs, at most %d workers; Azure LLM code trace 2023 at %gx, %g ms + %g ms/token\n",
		res.done, res.total, secs(res.waits.P95), res.workerSeconds, p.MaxWorkers, fixed,
		res.ups, res.downs, res.peak, r.Speedup, r.BaseMs, r.PerTokenMs)
}
