package snapshot

import (
	"fmt"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
	"github.com/flexiq/flexiq-scaled/internal/units"
)

// Facts are what a pool shows of itself at one moment, as its owner
// gathered them.
type Facts struct {
	Pool   string
	Wall   time.Time // the operator's clock: the view's UpdatedAt
	DryRun bool
	// Mode is the mode as status shows it ("dry-run, paused"); Override
	// the override in force at Wall, zero if none.
	Mode     string
	Override api.Override
	// Current counts the live workers and those starting (groups, in a
	// gang pool); Workers are the view's counts, whose Live is the started
	// ones alone, and whose Ready and NotReady are set for a service pool.
	Current   int
	Workers   api.WorkerCounts
	GroupSize int // the ranks of a gang pool's groups; 1 otherwise
	// WorkerList is the view's workers, live then draining.
	WorkerList []api.WorkerView
	NoQueue    bool // a service pool without a source
	Source     api.SourceView
	Counts     *source.Counts // the source's last good reading; nil before one
	Degraded   *api.Degraded  // nil while the pool is not degraded
	Fleet      *api.FleetView // nil for a pool not in a fleet
	// FleetSummary is the fleet's role and plan for the summary.
	FleetSummary string
}

// Publish makes the next summary and view of f: c is the source's counts
// of the tick, nil when it was not read (err says why, or nil when it was
// not asked); listed the tick's unit listing (nil when there was none); e
// the tick's explanation (nil when the tick decided nothing). It says
// whether the summary changed.
func (b *Board) Publish(f Facts, c *source.Counts, err error, listed []units.Worker, e *api.Explanation) bool {
	changed := b.Summarise(f, c, err)
	b.show(f, listed, e)
	return changed
}

// Summarise makes the next summary of f alone (see Publish), and says
// whether it changed.
func (b *Board) Summarise(f Facts, c *source.Counts, err error) bool {
	st := b.next.status
	old := st
	st.Current, st.Draining, st.Max = f.Current, f.Workers.Draining, f.Workers.Max
	st.GroupSize = f.GroupSize
	st.Mode = f.Mode
	st.NoQueue, st.Degraded = f.NoQueue, f.Degraded != nil
	st.Fleet = f.FleetSummary
	switch {
	case st.NoQueue:
	case c != nil:
		st.Pending, st.Paused, st.PendingKnown, st.SourceError = c.Pending, c.Paused, true, ""
	case err != nil:
		st.PendingKnown, st.SourceError = false, ShortError(err)
	}
	b.next.status = st
	return st != old
}

// show makes the next view of f.
func (b *Board) show(f Facts, listed []units.Worker, e *api.Explanation) {
	v := api.View{
		Pool:       f.Pool,
		DryRun:     f.DryRun,
		Workers:    f.Workers,
		Source:     f.Source,
		Degraded:   f.Degraded,
		Fleet:      f.Fleet,
		UpdatedAt:  f.Wall,
		WorkerList: f.WorkerList,
	}
	if f.GroupSize > 1 {
		v.Workers.GroupSize = f.GroupSize
	}
	v.Mode, v.Override = viewMode(f.Mode, f.Override)
	if f.Counts != nil && !f.NoQueue {
		v.Queue = queueView(*f.Counts)
	}
	b.next.setView(v, e)
	b.next.listed = listed
}

// Observation is the source's reading of the current tick, kept for its
// report.
type Observation struct {
	Counts source.Counts
	Valid  bool
	Err    error
}

// TickReport is the report of the tick just run, which decided d in took,
// having read o.
func TickReport(f Facts, d policy.Decision, took time.Duration, o Observation) api.TickReport {
	r := api.TickReport{
		Pool: f.Pool, Action: string(d.Action), Desired: d.Desired,
		Live: f.Current, Draining: f.Workers.Draining,
		Min: f.Workers.Min, Max: f.Workers.Max,
		SourceErr: o.Err,
		Duration:  took,
		Degraded:  f.Degraded != nil,
		Fleet:     f.Fleet,
	}
	r.Mode, _ = viewMode(f.Mode, f.Override)
	if f.Workers.Ready != nil {
		r.Service = true
		r.Ready, r.NotReady = *f.Workers.Ready, *f.Workers.NotReady
	}
	if o.Valid && !f.NoQueue {
		r.Queue = queueView(o.Counts)
	}
	return r
}

// queueView is a source's reading as status and the metrics show it.
func queueView(c source.Counts) *api.QueueView {
	q := &api.QueueView{Pending: c.Pending, Running: c.Running, Paused: c.Paused}
	if c.HasOldest {
		age := c.OldestAge.Seconds()
		q.OldestAgeSec = &age
	}
	return q
}

// ShortError is the first line of err, cut to fit a status line.
func ShortError(err error) string {
	s, _, _ := strings.Cut(err.Error(), "\n")
	if r := []rune(s); len(r) > 80 {
		s = string(r[:77]) + "..."
	}
	return s
}

// Status is a pool's one-line summary for STATUS= and for tests.
type Status struct {
	Name         string
	Current, Max int
	Draining     int
	Pending      int64
	Paused       int64
	PendingKnown bool
	// SourceError is the short form of the source's error while it fails.
	SourceError string
	// Mode is "active", or what an operator or the configuration made of
	// the pool: paused, pinned at N, dry-run (package override).
	Mode string
	// GroupSize is the ranks of a gang pool's groups (Current and Max
	// count groups); 0 or 1 for a pool of single units.
	GroupSize int
	// NoQueue: the pool reads no queue (a service pool without a source).
	NoQueue bool
	// Degraded: its baseline workers keep failing (degraded.go).
	Degraded bool
	// Fleet is a fleet pool's role and plan, e.g. "fleet leader, share
	// 10 of 20"; "" for a pool not in a fleet.
	Fleet string
}

func (s Status) String() string {
	queue := "? pending"
	switch {
	case s.NoQueue:
		queue = "no queue"
	case s.SourceError != "":
		queue = "? pending (" + s.SourceError + ")"
	case s.PendingKnown:
		queue = fmt.Sprintf("%d pending", s.Pending)
		if s.Paused > 0 {
			queue += fmt.Sprintf(", %d paused", s.Paused)
		}
	}
	mode := ""
	if s.Mode != "" && s.Mode != "active" {
		mode = " [" + s.Mode + "]"
	}
	workers := "workers"
	if s.GroupSize > 1 {
		workers = fmt.Sprintf("groups of %d", s.GroupSize)
	}
	if s.Degraded {
		mode += " [degraded]"
	}
	if s.Fleet != "" {
		mode += " [" + s.Fleet + "]"
		if !s.PendingKnown && s.SourceError == "" {
			queue = "queue read by the leader"
		}
	}
	return fmt.Sprintf("%s %d/%d %s, %s%s", s.Name, s.Current, s.Max, workers, queue, mode)
}
