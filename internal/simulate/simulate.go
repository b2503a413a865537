// Package simulate replays a recorded or hand-written trace of queue
// observations through the daemon's scaling policy, so that a pool's knobs
// can be tuned offline. It uses policy.Recommender exactly as the daemon
// does; only the clock and the workers are simulated, and the workers are
// assumed to follow every decision at once.
package simulate

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Output formats.
const (
	FormatJSONL = "jsonl"
	FormatTable = "table"
)

// epoch anchors trace time. The policy only compares instants, so any fixed
// one gives the same decisions; fixing it keeps runs reproducible.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// maxSeconds keeps epoch + t within time.Duration's range.
var maxSeconds = float64(math.MaxInt64) / float64(time.Second)

// Trace columns. Only t, pending and running are required.
const (
	colT         = "t"
	colPending   = "pending"
	colRunning   = "running"
	colCPU       = "cpu"
	colOldestAge = "oldest_age"
)

// tick is one parsed trace row.
type tick struct {
	t                float64
	pending, running *int64 // nil when the source failed on this tick
	cpu              float64
	cpuKnown         bool
	oldestAge        *float64 // seconds; nil when the source could not tell
	host             hostCells
}

// Run replays trace for pool and writes one line per row to out in format
// ("jsonl" or "table"). The pool starts at initial workers, or at its
// min_workers when initial is negative, and each tick's desired count is the
// next tick's current one.
//
// The trace is CSV with a header naming its columns, in any order: t
// (seconds, non-decreasing), pending and running, and optionally cpu (mean
// utilisation as a fraction of cpu_per_worker) and oldest_age (seconds the
// oldest ready job has waited, for the queue latency signal; empty when the
// source could not tell). An empty pending cell is a tick on which the source
// failed. The whole trace is
// read before anything is written, so a bad trace produces no output.
func Run(pool *config.Pool, trace io.Reader, initial int, format string, out io.Writer) error {
	return RunGuarded(pool, nil, trace, initial, format, out)
}

// RunGuarded is Run with the daemon's host guard (nil: none). The trace may
// also have the columns paused, host_cpu (busy share of all the host's
// cores, 0..1), psi_cpu and psi_memory ("some avg10", percent),
// mem_available (bytes), and one "promql:QUERY" column per promql()
// condition of a rules pool (see policies.go).
func RunGuarded(pool *config.Pool, guard *config.HostGuard, trace io.Reader, initial int, format string, out io.Writer) error {
	newSink, ok := sinks[format]
	if !ok {
		return fmt.Errorf("unknown output format %q (want %q or %q)", format, FormatJSONL, FormatTable)
	}
	ticks, cols, err := readTrace(trace)
	if err != nil {
		return err
	}
	st, err := newStepper(pool, guard)
	if err != nil {
		return err
	}
	s := newSink(out, st.extended(cols))

	current := initial
	if current < 0 {
		current = pool.MinWorkers
	}
	for _, tk := range ticks {
		o := policy.Observation{Current: current, CPU: tk.cpu, CPUKnown: tk.cpuKnown}
		if tk.oldestAge != nil {
			o.OldestAge, o.OldestKnown = seconds(*tk.oldestAge), true
		}
		if tk.pending != nil {
			o.Valid, o.Pending, o.Running = true, *tk.pending, *tk.running
		}
		now := epoch.Add(seconds(tk.t))
		d, host := st.step(now, o, tk)
		if err := s.write(tk, d, host); err != nil {
			return fmt.Errorf("write simulation output: %w", err)
		}
		current = d.Desired
	}
	if err := s.flush(); err != nil {
		return fmt.Errorf("write simulation output: %w", err)
	}
	return nil
}

// readTrace parses the whole trace. Errors name the line and the column.
func readTrace(r io.Reader) ([]tick, map[string]int, error) {
	cr := csv.NewReader(r)
	cr.TrimLeadingSpace = true
	cr.Comment = '#'
	header, err := cr.Read()
	if errors.Is(err, io.EOF) {
		return nil, nil, errors.New("trace is empty: want a header line naming t, pending and running")
	}
	if err != nil {
		return nil, nil, fmt.Errorf("read trace: %w", err)
	}
	cols := make(map[string]int, len(header))
	headerLine, _ := cr.FieldPos(0)
	for i, name := range header {
		// Spreadsheets like to start files with a byte order mark.
		name = strings.TrimSpace(strings.TrimPrefix(name, "\ufeff"))
		if !strings.HasPrefix(name, promqlPrefix) {
			// A query is case-sensitive; a column name is not.
			name = strings.ToLower(name)
		}
		switch {
		case slices.Contains([]string{colT, colPending, colRunning, colCPU, colOldestAge}, name):
		case slices.Contains(hostColumns, name), strings.HasPrefix(name, promqlPrefix):
		default:
			return nil, nil, fmt.Errorf("trace line %d, column %d: unknown column %q (want %s, %s, %s, %s, %s, %s or %s:QUERY)",
				headerLine, i+1, name, colT, colPending, colRunning, colCPU, colOldestAge, strings.Join(hostColumns, ", "), promqlPrefix)
		}
		if _, dup := cols[name]; dup {
			return nil, nil, fmt.Errorf("trace line %d, column %d: column %q appears twice", headerLine, i+1, name)
		}
		cols[name] = i
	}
	for _, name := range []string{colT, colPending, colRunning} {
		if _, ok := cols[name]; !ok {
			return nil, nil, fmt.Errorf("trace line %d: no %q column", headerLine, name)
		}
	}

	var ticks []tick
	prevT := math.Inf(-1)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			return ticks, cols, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read trace: %w", err)
		}
		line, _ := cr.FieldPos(0)
		tk, err := parseRow(rec, cols, prevT)
		if err == nil {
			tk.host, err = parseHost(rec, cols)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("trace line %d, %w", line, err)
		}
		prevT = tk.t
		ticks = append(ticks, tk)
	}
}

// cellError names the column a bad cell is in; readTrace adds the line.
type cellError struct {
	col string
	msg string
}

func (e *cellError) Error() string { return fmt.Sprintf("column %s: %s", e.col, e.msg) }

func parseRow(rec []string, cols map[string]int, prevT float64) (tick, error) {
	cell := func(name string) string {
		if i, ok := cols[name]; ok {
			return strings.TrimSpace(rec[i])
		}
		return ""
	}
	var tk tick

	t, err := parseFloat(cell(colT))
	switch {
	case err != nil:
		return tk, &cellError{colT, err.Error()}
	case math.Abs(t) > maxSeconds:
		return tk, &cellError{colT, fmt.Sprintf("%g seconds is out of range", t)}
	case t < prevT:
		return tk, &cellError{colT, fmt.Sprintf("%g is before the previous row's %g; time must not go backwards", t, prevT)}
	}
	tk.t = t

	// An empty pending cell is the source failing, which the policy turns
	// into a hold; running is meaningless then.
	if p := cell(colPending); p != "" {
		pending, err := parseInt(p)
		if err != nil {
			return tk, &cellError{colPending, err.Error()}
		}
		r := cell(colRunning)
		if r == "" {
			return tk, &cellError{colRunning, "empty while pending is not; leave both empty for a failed tick"}
		}
		running, err := parseInt(r)
		if err != nil {
			return tk, &cellError{colRunning, err.Error()}
		}
		tk.pending, tk.running = &pending, &running
	}

	if c := cell(colCPU); c != "" {
		cpu, err := parseFloat(c)
		if err == nil && cpu < 0 {
			err = errors.New("must not be negative")
		}
		if err != nil {
			return tk, &cellError{colCPU, err.Error()}
		}
		tk.cpu, tk.cpuKnown = cpu, true
	}

	// An empty oldest_age is an age the source could not tell (nothing
	// ready, or a queue that keeps no enqueue time): the latency signal then
	// sits the tick out, as it does in the daemon.
	if a := cell(colOldestAge); a != "" {
		age, err := parseFloat(a)
		switch {
		case err != nil:
		case age < 0:
			err = errors.New("must not be negative")
		case age > maxSeconds:
			err = fmt.Errorf("%g seconds is out of range", age)
		}
		if err != nil {
			return tk, &cellError{colOldestAge, err.Error()}
		}
		tk.oldestAge = &age
	}
	return tk, nil
}

// seconds converts trace seconds, already checked to be in range.
func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * float64(time.Second)))
}

func parseFloat(s string) (float64, error) {
	if s == "" {
		return 0, errors.New("empty; want a number")
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return f, nil
}

func parseInt(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not an integer", s)
	}
	return n, nil
}

// sink writes decisions in one output format.
type sink interface {
	write(tk tick, d policy.Decision, host policy.HostState) error
	flush() error
}

// sinks make a sink; extended adds the columns of issue 9's policies
// (host readings, what the guard did, which limit held, which rule acted).
var sinks = map[string]func(io.Writer, bool) sink{
	FormatJSONL: newJSONLSink,
	FormatTable: newTableSink,
}

type jsonlSink struct{ enc *json.Encoder }

// newJSONLSink writes the extra keys only when they have a value, so that
// a trace without them reads as before.
func newJSONLSink(out io.Writer, _ bool) sink {
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	return jsonlSink{enc}
}

// jsonlRow fixes the key order of a jsonl line.
// oldest_age is null when the trace did not know it, latency when the
// latency signal sat the tick out (off, or no age known).
type jsonlRow struct {
	T         float64       `json:"t"`
	Pending   *int64        `json:"pending"`
	Running   *int64        `json:"running"`
	OldestAge *float64      `json:"oldest_age"`
	Current   int           `json:"current"`
	Desired   int           `json:"desired"`
	Latency   *int          `json:"latency"`
	Action    policy.Action `json:"action"`
	Rationale string        `json:"rationale"`
	// Issue 9's, when they have a value.
	HostCPU    *float64            `json:"host_cpu,omitempty"`
	HostCPUEMA *float64            `json:"host_cpu_ema,omitempty"`
	Rule       string              `json:"rule,omitempty"`
	Limit      string              `json:"limit,omitempty"`
	Guard      policy.GuardOutcome `json:"guard,omitempty"`
}

func (s jsonlSink) write(tk tick, d policy.Decision, host policy.HostState) error {
	var latency *int
	if d.LatencyUsed {
		latency = &d.Latency
	}
	cpu, ema := hostCPU(host)
	return s.enc.Encode(jsonlRow{
		HostCPU: cpu, HostCPUEMA: ema, Rule: d.Rule, Limit: d.Limit, Guard: d.Guard,
		T:         tk.t,
		Pending:   tk.pending,
		Running:   tk.running,
		OldestAge: tk.oldestAge,
		Current:   d.Current,
		Desired:   d.Desired,
		Latency:   latency,
		Action:    d.Action,
		Rationale: d.Rationale,
	})
}

func (jsonlSink) flush() error { return nil }

type tableSink struct {
	tw       *tabwriter.Writer
	extended bool
}

func newTableSink(out io.Writer, extended bool) sink {
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	// tabwriter keeps write errors until Flush, which reports them.
	extra := ""
	if extended {
		extra = "HOST_CPU\tHOST_CPU_EMA\tGUARD\tRULE\t"
	}
	fmt.Fprintln(tw, "T\tPENDING\tRUNNING\tOLDEST_AGE\tCURRENT\tDESIRED\tLATENCY\t"+extra+"ACTION\tRATIONALE")
	return tableSink{tw, extended}
}

func (s tableSink) write(tk tick, d policy.Decision, host policy.HostState) error {
	age, latency := "-", "-"
	if tk.oldestAge != nil {
		age = strconv.FormatFloat(*tk.oldestAge, 'f', -1, 64)
	}
	if d.LatencyUsed {
		latency = strconv.Itoa(d.Latency)
	}
	extra := ""
	if s.extended {
		dash := func(s string) string {
			if s == "" {
				return "-"
			}
			return s
		}
		cpu, ema := "-", "-"
		if c, e := hostCPU(host); c != nil {
			cpu, ema = strconv.FormatFloat(*c, 'f', -1, 64), strconv.FormatFloat(*e, 'f', -1, 64)
		}
		// The limit that held is in the rationale, which has room for it.
		extra = fmt.Sprintf("%s\t%s\t%s\t%s\t", cpu, ema, dash(string(d.Guard)), dash(d.Rule))
	}
	_, err := fmt.Fprintf(s.tw, "%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s%s\t%s\n",
		strconv.FormatFloat(tk.t, 'f', -1, 64), count(tk.pending), count(tk.running), age,
		d.Current, d.Desired, latency, extra, d.Action, d.Rationale)
	return err
}

func (s tableSink) flush() error { return s.tw.Flush() }

func count(n *int64) string {
	if n == nil {
		return "-"
	}
	return strconv.FormatInt(*n, 10)
}
