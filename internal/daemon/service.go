package daemon

import (
	"context"
	"os"
	"strings"
	"syscall"
	"time"

	sddaemon "github.com/coreos/go-systemd/v22/daemon"
	"golang.org/x/sys/unix"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// stallGrace is how far beyond its poll interval a pool's tick may lag
// before the watchdog stops being fed: a tick is bounded by the source
// timeout and a few D-Bus timeouts, so only a truly wedged loop gets here.
const stallGrace = 90 * time.Second

// kickStatus asks for STATUS= to be pushed now; it never blocks.
func (d *daemon) kickStatus() {
	select {
	case d.statusKick <- struct{}{}:
	default: // one is already pending; it will read the latest status
	}
}

// serveSignals reloads on SIGHUP and on every reload request from the
// control socket until a stop signal, and returns the exit code. It alone
// reloads, so reloads never overlap. hup says a SIGHUP came during the
// start, after the configuration was read: it is honoured first.
func (d *daemon) serveSignals(ctx context.Context, sigs <-chan os.Signal, hup bool) int {
	if hup {
		d.reload(ctx, d.queuedReloads(nil))
	}
	for {
		select {
		case s := <-sigs:
			if s != syscall.SIGHUP {
				// A drain may take minutes: a reload asked
				// meanwhile is told at once that none will come.
				close(d.loopDone)
				return d.shutdown(ctx, s)
			}
			// A plain SIGHUP answers no one, but takes along the
			// requests already waiting.
			d.reload(ctx, d.queuedReloads(nil))
		case ask := <-d.reloads:
			// Every request waiting now is taken before the file
			// is read: each is answered by a reload that read it
			// after the request was made, and a burst of them costs
			// one reload.
			d.reload(ctx, d.queuedReloads([]reloadAsk{ask}))
		}
	}
}

// startWatchdog starts the goroutine that feeds systemd's watchdog and
// pushes STATUS=; the returned function stops it.
func (d *daemon) startWatchdog(ctx context.Context) context.CancelFunc {
	wdCtx, stopWatchdog := context.WithCancel(ctx)
	wdInterval, _ := sddaemon.SdWatchdogEnabled(false)
	wdTick := 2 * time.Second
	if wdInterval > 0 {
		wdTick = min(wdTick, wdInterval/3)
	}
	go d.watchdog(wdCtx, wdInterval, wdTick)
	return stopWatchdog
}

// watchdog feeds systemd's watchdog only while every pool keeps ticking, so
// that a wedged loop (a hung D-Bus call, a deadlock) gets the daemon
// restarted; the next one adopts the workers. It also keeps STATUS= current.
//
// interval is the watchdog's (0: none); tick is how often it is fed, and
// STATUS= refreshed even without a kick.
func (d *daemon) watchdog(ctx context.Context, interval, tick time.Duration) {
	lastStatus := ""
	ticker := time.NewTicker(tick)
	defer ticker.Stop()
	for {
		feed := false
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
			feed = true
		case <-d.statusKick:
			// A pool's status changed: push it now, not at the
			// next tick of the watchdog.
		}
		var state []string
		if st := d.status(); st != lastStatus {
			state = append(state, "STATUS="+st)
			lastStatus = st
		}
		if feed && interval > 0 {
			if stalled := d.stalled(time.Now()); stalled == "" {
				state = append(state, "WATCHDOG=1")
			} else {
				d.log.Event(eventlog.Lifecycle, eventlog.Err, nil, "pool %s has made no progress: not feeding the watchdog", stalled)
			}
		}
		if len(state) > 0 {
			notify(strings.Join(state, "\n"))
		}
	}
}

// stalled names a pool whose loop has not completed a tick for too long.
func (d *daemon) stalled(now time.Time) string {
	d.mu.Lock()
	stopping := d.stopping
	d.mu.Unlock()
	if stopping {
		return ""
	}
	for _, rp := range d.snapshot() {
		d.mu.Lock()
		reloadedAt := rp.reloadedAt
		d.mu.Unlock()
		if isStalled(now, rp.pool.LastProgress(), reloadedAt, rp.pool.PollInterval()) {
			return rp.pool.Name()
		}
	}
	return ""
}

// isStalled judges a pool's loop: stalled when neither a tick nor a reload
// of its configuration happened within its poll interval plus stallGrace.
// A reload counts because the loop may have been sleeping out an old, longer
// interval: the new one is judged from the reload on (and the controller's
// Update wakes the loop at once).
func isStalled(now, lastProgress, reloadedAt time.Time, poll time.Duration) bool {
	since := lastProgress
	if reloadedAt.After(since) {
		since = reloadedAt
	}
	return now.Sub(since) > poll+stallGrace
}

// status is the one-line summary for `systemctl status`.
func (d *daemon) status() string {
	pools := d.snapshot()
	if len(pools) == 0 {
		return "no pools configured"
	}
	parts := make([]string, 0, len(pools))
	for _, rp := range pools {
		parts = append(parts, rp.pool.Status().String())
	}
	return strings.Join(parts, "; ")
}

func notify(state string) {
	// Outside systemd there is no socket, and nothing to tell.
	_, _ = sddaemon.SdNotify(false, state)
}

func monotonicUsec() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano() / 1000
}

// ownUnit is the service unit this process runs in, from its cgroup path
// (e.g. /system.slice/flexiq-scaled.service), or "" outside a service.
func ownUnit() string {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return ""
	}
	return unitFromCgroup(string(b))
}

func unitFromCgroup(procCgroup string) string {
	for _, line := range strings.Split(procCgroup, "\n") {
		// cgroup2 ("0::/...") or the v1 systemd hierarchy ("1:name=systemd:/...").
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || (parts[1] != "" && parts[1] != "name=systemd") {
			continue
		}
		path := parts[2]
		base := path[strings.LastIndex(path, "/")+1:]
		if strings.HasSuffix(base, ".service") {
			return base
		}
	}
	return ""
}
