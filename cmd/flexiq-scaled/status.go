package main

// The operator's commands, which speak to the daemon's control socket
// (internal/control): status, explain, pause, resume, pin, unpin.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/control"
	"github.com/flexiq/flexiq-scaled/internal/daemon"
)

// socketFlags find the control socket.
type socketFlags struct {
	socket *string
	user   *bool
}

func addSocketFlags(fs *flag.FlagSet) socketFlags {
	return socketFlags{
		socket: fs.String("socket", "", "the daemon's control `SOCKET` (default: root.sock, which answers root alone, else control.sock, in /run/flexiq-scaled, or $XDG_RUNTIME_DIR/flexiq-scaled with --user)"),
		user:   fs.Bool("user", false, "the daemon runs under the user's service manager (run --user)"),
	}
}

func (f socketFlags) client() *control.Client {
	return socketClient(*f.socket, daemon.RuntimeDir(*f.user))
}

// socketClient is the client for the socket the flags name, or else for
// the daemon's sockets in its runtime directory dir: root.sock first, which
// answers root (or a --user daemon's user) whatever other users do to
// control.sock, then control.sock.
func socketClient(socket, dir string) *control.Client {
	if socket != "" {
		return &control.Client{Socket: socket}
	}
	return &control.Client{Socket: filepath.Join(dir, control.SocketName), Root: filepath.Join(dir, control.RootSocketName)}
}

// parseArgs parses flags and positional arguments in any order, as
// `pause email --for 10m` is written.
func parseArgs(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (pos []string, code int, done bool) {
	for {
		if code, done := parseFlags(fs, args, stdout, stderr); done {
			return nil, code, true
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, exitOK, false
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), exitOK, false
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// controlFailed reports a failed request in one line: the daemon not
// running, a permission refused, or the daemon's own message.
func controlFailed(stderr io.Writer, name string, err error) int {
	if errors.Is(err, control.ErrNotRunning) {
		fmt.Fprintf(stderr, "%s %s: %v\n", prog, name, err)
		return exitFail
	}
	return failf(stderr, name, "%v", err)
}

func cmdStatus(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("status", "[POOL] [--json] [--watch] [--names]", `
Show what each pool (or POOL) is doing, one block a pool:

  ● POOL - MODE  the mode: active, paused or pinned (with a --for deadline),
              dry-run, degraded; the bullet is × while the source fails, the
              fleet's store does not answer or the pool is degraded
  Degraded:   since when and why the pool is short of its min_workers
  Workers:    live, draining; the target, min and max
  Groups:     the same for a gang pool (group_size of 2 or more), counted
              in groups, with the ranks of each
  Acting:     starts and stops asked of systemd and not answered yet (only
              while there are any)
  Replicas:   a service pool's live replicas: ready (in discovery) and not
              ready (starting, or failing their readiness probe)
  Queue:      pending, running and paused jobs, the oldest ready job's age;
              "none" for a service without a queue; on a fleet follower,
              read by the fleet's leader
  Source:     its type, ok or failing, when it was last read (not on a
              fleet follower)
  Fleet:      a fleet pool's store ("not answering" when it fails), the
              lease's leader (this host or another) and epoch, this host
  Plan:       the fleet's target, this host's share of it and its phase
              (fresh, joining, hold, fallback, none), the plan's epoch, age
  Fleet error: the store's last failure
  Host:       one line per host of the fleet: its share, its live workers
              and capacity as its last heartbeat said ("?": unknown)
  Last error: the source's last error, and how long ago
  Decision:   the last decision: action, current -> target, how long ago,
              its rationale and the step that held it

Then one line per worker (a gang group's, by its rank 0):
  SLOT, UNIT; STATE, active or draining, or a service replica's readiness:
  ready, starting, not-ready; UPTIME; CPU% over the last tick, in percent
  of one CPU; MEMORY, from its cgroup ("-" where the cgroup does not tell);
  RESTARTS, how often its slot crashed since the daemon started.

Host ids are the first 12 characters of a machine id; an id read from the
store with other characters than letters, digits, '.', '_' and '-' is
printed quoted, and control characters in any text from the store, a source
or a unit are printed escaped.

--json prints the same as JSON, with stable field names, for scripts (also
each replica's ports by name, and a gang pool's group size). --watch
redraws every second until Ctrl-C. --names prints the pools' names, one a
line (for shell completion).

Reading needs root or membership of group flexiq-scaled.`)
	asJSON := fs.Bool("json", false, "print JSON")
	watch := fs.Bool("watch", false, "redraw every second until interrupted")
	names := fs.Bool("names", false, "print only the pools' names")
	sf := addSocketFlags(fs)
	pos, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) > 1 {
		return usageError(fs, stderr, "unexpected argument %q", pos[1])
	}
	pool := ""
	if len(pos) == 1 {
		pool = pos[0]
	}
	c := sf.client()
	show := func() int {
		resp, err := c.Status(pool)
		if err != nil {
			return controlFailed(stderr, "status", err)
		}
		switch {
		case *names:
			for _, v := range resp.Pools {
				fmt.Fprintln(stdout, v.Pool)
			}
		case *asJSON:
			enc := json.NewEncoder(stdout)
			enc.SetIndent("", "  ")
			_ = enc.Encode(resp)
		default:
			printStatus(stdout, resp.Pools, time.Now())
		}
		return exitOK
	}
	if !*watch {
		return show()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		// Home and clear, then the page: redrawn in place.
		fmt.Fprint(stdout, "\033[H\033[2J")
		if code := show(); code != exitOK {
			return code
		}
		select {
		case <-ctx.Done():
			return exitOK
		case <-t.C:
		}
	}
}

// printStatus writes the pools as systemctl status does its units: a
// headline with a bullet, indented key lines, then a table of workers.
func printStatus(w io.Writer, pools []api.View, now time.Time) {
	if len(pools) == 0 {
		fmt.Fprintln(w, "no pools configured")
		return
	}
	for i, v := range pools {
		if i > 0 {
			fmt.Fprintln(w)
		}
		bullet := "●"
		follower := v.Fleet != nil && !v.Fleet.IsLeader
		if (!v.Source.Healthy && !follower) || (v.Fleet != nil && !v.Fleet.Reachable) {
			bullet = "×"
		}
		mode := v.Mode
		if v.Override != nil {
			mode = v.Override.String()
			if v.DryRun {
				mode = "dry-run, " + mode
			}
		}
		if v.Degraded != nil {
			bullet = "×"
			mode += ", degraded"
		}
		fmt.Fprintf(w, "%s %s - %s\n", bullet, v.Pool, mode)
		if dg := v.Degraded; dg != nil {
			fmt.Fprintf(w, "  Degraded: for %s: %s\n", fmtDuration(now.Sub(dg.Since)), api.Printable(dg.Reason))
		}
		wc := v.Workers
		if wc.GroupSize > 1 {
			fmt.Fprintf(w, "    Groups: %d live, %d draining; target %d (min %d, max %d); %d ranks each\n",
				wc.Live, wc.Draining, wc.Target, wc.Min, wc.Max, wc.GroupSize)
		} else {
			fmt.Fprintf(w, "   Workers: %d live, %d draining; target %d (min %d, max %d)\n", wc.Live, wc.Draining, wc.Target, wc.Min, wc.Max)
		}
		if wc.Starting > 0 || wc.Stopping > 0 {
			fmt.Fprintf(w, "    Acting: starting %d, stopping %d (asked of systemd, not answered yet)\n", wc.Starting, wc.Stopping)
		}
		if wc.Ready != nil && wc.NotReady != nil {
			fmt.Fprintf(w, "  Replicas: %d ready, %d not ready\n", *wc.Ready, *wc.NotReady)
		}
		if follower {
			fmt.Fprintln(w, "     Queue: read by the fleet's leader")
		} else if q := v.Queue; v.Source.Type == "none" {
			fmt.Fprintln(w, "     Queue: none (a service scaled by its rules and CPU)")
		} else if q != nil {
			oldest := "-"
			if q.OldestAgeSec != nil {
				oldest = fmtDuration(time.Duration(*q.OldestAgeSec * float64(time.Second)))
			}
			fmt.Fprintf(w, "     Queue: %d pending, %d running, %d paused; oldest %s\n", q.Pending, q.Running, q.Paused, oldest)
		} else {
			fmt.Fprintln(w, "     Queue: not read yet")
		}
		src := v.Source.Type + ": "
		if v.Source.Healthy {
			src += "ok"
		} else {
			src += "failing"
		}
		if !v.Source.LastSuccess.IsZero() {
			src += fmt.Sprintf(", last read %s ago", fmtDuration(now.Sub(v.Source.LastSuccess)))
		}
		if !follower {
			fmt.Fprintf(w, "    Source: %s\n", src)
		}
		if f := v.Fleet; f != nil {
			printFleet(w, f)
		}
		if v.Source.LastError != "" {
			fmt.Fprintf(w, "Last error: %s ago: %s\n", fmtDuration(now.Sub(v.Source.LastErrorAt)), api.Printable(firstLine(v.Source.LastError)))
		}
		if d := v.LastDecision; d != nil {
			held := ""
			if d.HeldBy != "" {
				held = "; held by " + api.Printable(d.HeldBy)
			}
			fmt.Fprintf(w, "  Decision: %s %d -> %d, %s ago (%s%s)\n", d.Action, d.Current, d.Desired, fmtDuration(now.Sub(d.Time)), api.Printable(d.Rationale), held)
		}
		if len(v.WorkerList) == 0 {
			continue
		}
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SLOT\tUNIT\tSTATE\tUPTIME\tCPU%\tMEMORY\tRESTARTS")
		for _, wv := range v.WorkerList {
			up, cpu, mem := "-", "-", "-"
			if wv.UptimeSec != nil {
				up = fmtDuration(time.Duration(*wv.UptimeSec * float64(time.Second)))
			}
			if wv.CPUPercent != nil {
				cpu = strconv.FormatFloat(*wv.CPUPercent, 'f', 1, 64)
			}
			if wv.MemoryBytes != nil {
				mem = fmtBytes(*wv.MemoryBytes)
			}
			state := wv.State
			if wv.Readiness != "" {
				// A replica's readiness says more than "active".
				state = wv.Readiness
			}
			fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\n", wv.Slot, api.Printable(wv.Unit), api.Printable(state), up, cpu, mem, wv.Restarts)
		}
		tw.Flush()
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// fmtDuration is a duration as people read it: 4.2s, 5m12s, 3h04m, 2d03h.
func fmtDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "0s"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%02dh", int(d.Hours())/24, int(d.Hours())%24)
}

func fmtBytes(b uint64) string {
	const unit = 1024
	if b < unit {
		return fmt.Sprintf("%dB", b)
	}
	v, suffix := float64(b), ""
	for _, s := range []string{"K", "M", "G", "T"} {
		v /= unit
		suffix = s
		if v < unit {
			break
		}
	}
	return fmt.Sprintf("%.1f%s", v, suffix)
}

func cmdExplain(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("explain", "POOL [--last N] [--json]", `
Show the pool's last N decisions (newest last), each with every input and
step from the queue to the result: the source's counts; the depth, busy,
CPU and latency signals; the bounds; the tolerance; the recommendation of
the tick alone; the scale-up and scale-down windows; an operator's pause or
pin; dry-run. A step marked "<- held" kept the pool from what the steps
before it asked for; "held by" names the one with the last word. The daemon
keeps the last 100 decisions of each pool, in memory.`)
	last := fs.Int("last", 10, "how many decisions")
	asJSON := fs.Bool("json", false, "print JSON")
	sf := addSocketFlags(fs)
	pos, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "want exactly one POOL")
	}
	if *last < 1 {
		return usageError(fs, stderr, "--last must be at least 1")
	}
	resp, err := sf.client().Explain(pos[0], *last)
	if err != nil {
		return controlFailed(stderr, "explain", err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
		return exitOK
	}
	if len(resp.Decisions) == 0 {
		fmt.Fprintf(stdout, "pool %s has decided nothing yet\n", resp.Pool)
	}
	for i, e := range resp.Decisions {
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		fmt.Fprintf(stdout, "%s %s: %s %d -> %d (mode %s)\n", e.Time.Local().Format("2006-01-02 15:04:05"), resp.Pool, e.Action, e.Current, e.Desired, e.Mode)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, s := range e.Steps {
			held := ""
			if s.Held {
				held = "<- held"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", api.Printable(s.Name), api.Printable(s.Value), held, api.Printable(s.Note))
		}
		tw.Flush()
		if e.HeldBy != "" {
			fmt.Fprintf(stdout, "  held by: %s\n", api.Printable(e.HeldBy))
		}
	}
	return exitOK
}

func cmdPause(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("pause", "POOL [--for DURATION]", `
Stop the pool's scaling: it holds its current target whatever the queue
says, and crashed workers are still replaced up to it. --for ends the pause
by itself after DURATION (e.g. 10m, 2h), on the wall clock, across restarts
of the daemon. The pause is kept in /var/lib/flexiq-scaled until "resume".
Needs root or membership of group flexiq-scaled-admin.`, args, stdout, stderr)
}

func cmdResume(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("resume", "POOL", `
End a pause: the pool scales again from its next tick. A pinned pool is
unpinned with "unpin" instead. Needs root or membership of group
flexiq-scaled-admin.`, args, stdout, stderr)
}

func cmdPin(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("pin", "POOL N [--for DURATION]", `
Hold exactly N workers (0 to max_workers), starting or draining workers at
once, whatever the queue says; crashed workers are replaced. --for ends the
pin by itself after DURATION, on the wall clock, across restarts. The pin is
kept in /var/lib/flexiq-scaled until "unpin". Needs root or membership of
group flexiq-scaled-admin.`, args, stdout, stderr)
}

func cmdUnpin(args []string, stdout, stderr io.Writer) int {
	return overrideCmd("unpin", "POOL", `
End a pin: the pool scales again from its next tick. Needs root or
membership of group flexiq-scaled-admin.`, args, stdout, stderr)
}

func overrideCmd(verb, synopsis, description string, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet(verb, synopsis, description)
	var forD *time.Duration
	if verb == "pause" || verb == "pin" {
		forD = fs.Duration("for", 0, "end by itself after `DURATION` (default: until "+map[string]string{"pause": "resume", "pin": "unpin"}[verb]+")")
	}
	asJSON := fs.Bool("json", false, "print the daemon's answer as JSON")
	sf := addSocketFlags(fs)
	pos, code, done := parseArgs(fs, args, stdout, stderr)
	if done {
		return code
	}
	want := 1
	if verb == "pin" {
		want = 2
	}
	if len(pos) != want {
		return usageError(fs, stderr, "want %s", synopsis)
	}
	var req api.ChangeRequest
	if forD != nil {
		if *forD < 0 {
			return usageError(fs, stderr, "--for must not be negative")
		}
		req.ForSec = forD.Seconds()
	}
	if verb == "pin" {
		n, err := strconv.Atoi(pos[1])
		if err != nil || n < 0 {
			return usageError(fs, stderr, "N: want a number of workers, not %q", pos[1])
		}
		req.Workers = &n
	}
	resp, err := sf.client().Change(pos[0], verb, req)
	if err != nil {
		return controlFailed(stderr, verb, err)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(resp)
		return exitOK
	}
	fmt.Fprintln(stdout, resp.Message)
	return exitOK
}

// printFleet writes a fleet pool's coordination: the lease, the plan, and
// each host's share, live count and capacity.
func printFleet(w io.Writer, f *api.FleetView) {
	leader := "none"
	if f.Leader != "" {
		leader = api.ShortHostID(f.Leader)
		switch {
		case f.IsLeader:
			leader += " (this host)"
		case f.Leader == f.HostID:
			leader += " (this host's previous daemon, until its lease lapses)"
		}
	}
	store := api.Printable(f.Store)
	if !f.Reachable {
		store += " (not answering)"
	}
	fmt.Fprintf(w, "     Fleet: %s; leader %s, epoch %d; this host %s\n", store, leader, f.Epoch, api.ShortHostID(f.HostID))
	age := "no plan yet"
	if f.PlanAgeSec != nil {
		age = fmt.Sprintf("plan epoch %d, %s old", f.PlanEpoch, fmtDuration(time.Duration(*f.PlanAgeSec*float64(time.Second))))
	}
	fmt.Fprintf(w, "      Plan: fleet target %d, this host's share %d (%s); %s\n", f.Target, f.Share, f.Phase, age)
	if f.Error != "" {
		fmt.Fprintf(w, "Fleet error: %s\n", api.Printable(firstLine(f.Error)))
	}
	for _, h := range f.Hosts {
		live, capa := "?", "?"
		if h.Live >= 0 {
			live = strconv.Itoa(h.Live)
		}
		if h.Capacity >= 0 {
			capa = strconv.Itoa(h.Capacity)
		}
		me := ""
		if h.ID == f.HostID {
			me = " (this host)"
		}
		fmt.Fprintf(w, "      Host: %s share %d, live %s, capacity %s%s\n", api.ShortHostID(h.ID), h.Share, live, capa, me)
	}
	if f.MembersError != "" {
		fmt.Fprintf(w, "            (%s)\n", api.Printable(firstLine(f.MembersError)))
	}
}
