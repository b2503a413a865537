package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

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
		printPool(w, v, now)
	}
}

// printPool writes one pool's block: the headline, its key lines in the
// order status --help lists them, and its workers.
func printPool(w io.Writer, v api.View, now time.Time) {
	// A fleet's follower neither reads the source nor counts the queue.
	follower := v.Fleet != nil && !v.Fleet.IsLeader
	fmt.Fprintln(w, headline(v, follower))
	if dg := v.Degraded; dg != nil {
		fmt.Fprintf(w, "  Degraded: for %s: %s\n", fmtDuration(now.Sub(dg.Since)), api.Printable(dg.Reason))
	}
	printCounts(w, v.Workers)
	fmt.Fprintf(w, "     Queue: %s\n", queueLine(v, follower))
	if !follower {
		fmt.Fprintf(w, "    Source: %s\n", sourceLine(v.Source, now))
	}
	if f := v.Fleet; f != nil {
		printFleet(w, f)
	}
	if wv := v.Wake; wv != nil {
		fmt.Fprintf(w, "      Wake: %s\n", wakeLine(wv))
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
		return
	}
	fmt.Fprintln(w)
	printWorkers(w, v.WorkerList)
}

// headline is "● POOL - MODE", the bullet × while the pool is in trouble.
func headline(v api.View, follower bool) string {
	bullet := "●"
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
	return fmt.Sprintf("%s %s - %s", bullet, v.Pool, mode)
}

// printCounts writes the Workers (or a gang pool's Groups), Acting and a
// service pool's Replicas lines.
func printCounts(w io.Writer, wc api.WorkerCounts) {
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
}

// queueLine is what the Queue line says.
func queueLine(v api.View, follower bool) string {
	q := v.Queue
	switch {
	case follower:
		return "read by the fleet's leader"
	case v.Source.Type == "none":
		return "none (a service scaled by its rules and CPU)"
	case q == nil:
		return "not read yet"
	}
	oldest := "-"
	if q.OldestAgeSec != nil {
		oldest = fmtDuration(time.Duration(*q.OldestAgeSec * float64(time.Second)))
	}
	return fmt.Sprintf("%d pending, %d running, %d paused; oldest %s", q.Pending, q.Running, q.Paused, oldest)
}

// sourceLine is what the Source line says: its type, ok or failing, and
// when it was last read.
func sourceLine(sv api.SourceView, now time.Time) string {
	src := sv.Type + ": "
	if sv.Healthy {
		src += "ok"
	} else {
		src += "failing"
	}
	if !sv.LastSuccess.IsZero() {
		src += fmt.Sprintf(", last read %s ago", fmtDuration(now.Sub(sv.LastSuccess)))
	}
	return src
}

// printWorkers writes the table of workers, one line a worker.
func printWorkers(w io.Writer, workers []api.WorkerView) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tUNIT\tSTATE\tUPTIME\tCPU%\tMEMORY\tRESTARTS")
	for _, wv := range workers {
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
