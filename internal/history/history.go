// Package history reads a pool's scaling decisions back from the journal
// (journalctl -o json, the entries eventlog writes with MESSAGE_ID of a
// decision and the pool's FLEXIQ_* fields) and turns them into series:
// pending jobs, live workers and the target over time, with the scale
// events. It needs no cgo: journalctl does the reading.
package history

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/eventlog"
)

// Point is one decision entry.
type Point struct {
	Time time.Time
	// Pending and Running are the queue's counts; Known is false when the
	// source could not be read (the entry has none).
	Pending, Running int64
	Known            bool
	// Live is the live workers the decision saw, Target what it decided.
	Live, Target int
	Action       string // scale-up, scale-down, stable
}

// The daemon's own entries: written by its unit, as root. Anyone on the
// host may write an entry with any MESSAGE_ID and FLEXIQ_* fields (logger
// --journald), but not these trusted fields, which journald sets itself.
const (
	DaemonUnit = "flexiq-scaled.service"
	daemonUID  = "0"
)

// JournalArgs are journalctl's arguments for pool's decisions between since
// and until (systemd.time(7) specifications; "" for no bound). Only the
// daemon's own entries match.
func JournalArgs(pool, since, until string) []string {
	args := []string{"--no-pager", "-o", "json", "MESSAGE_ID=" + string(eventlog.Decision), "FLEXIQ_POOL=" + pool,
		"_SYSTEMD_UNIT=" + DaemonUnit, "_UID=" + daemonUID}
	if since != "" {
		args = append(args, "--since", since)
	}
	if until != "" {
		args = append(args, "--until", until)
	}
	return args
}

// MaxLine is the longest journal line Parse reads. A decision entry is a
// kilobyte or two; a longer line is someone else's entry, skipped without
// being held in memory.
const MaxLine = 1 << 20

// Skipped counts the entries Parse left out of the series.
type Skipped struct {
	// Foreign are decision entries for the pool that the daemon did not
	// write: another unit or another user wrote them.
	Foreign int
	// Long are lines over MaxLine.
	Long int
}

// Parse reads journalctl -o json output (one JSON object a line) and
// returns pool's decision entries in order. Other entries are skipped, so
// that a wider query does no harm: those of other pools and messages, those
// not written by the daemon's unit as root (counted as Foreign: the
// journalctl matches already leave them out, this is the second check), and
// lines too long to be a decision (counted as Long). A line that is not
// JSON is an error naming it.
func Parse(r io.Reader, pool string) ([]Point, Skipped, error) {
	var (
		pts  []Point
		skip Skipped
	)
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, long, err := readLine(br, MaxLine)
		if err != nil && err != io.EOF {
			return nil, skip, fmt.Errorf("journal line %d: %w", n, err)
		}
		if long {
			skip.Long++
		} else if len(bytes.TrimSpace(line)) > 0 {
			p, ok, foreign, perr := parseEntry(line, pool)
			switch {
			case perr != nil:
				return nil, skip, fmt.Errorf("journal line %d: %w", n, perr)
			case foreign:
				skip.Foreign++
			case ok:
				pts = append(pts, p)
			}
		}
		if err == io.EOF {
			return pts, skip, nil
		}
	}
}

// readLine reads one line (without its newline) of at most max bytes; a
// longer one is read to its end and dropped, and long is true.
func readLine(br *bufio.Reader, max int) (line []byte, long bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !long {
			if len(line)+len(chunk) > max+1 {
				long, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err == bufio.ErrBufferFull {
			continue
		}
		return bytes.TrimSuffix(line, []byte("\n")), long, err
	}
}

// parseEntry reads one journal entry: ok when it is one of pool's
// decisions by the daemon, foreign when it looks like one but another unit
// or user wrote it.
func parseEntry(line []byte, pool string) (p Point, ok, foreign bool, err error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(line, &raw); err != nil {
		return Point{}, false, false, err
	}
	// A field is a string, or (binary, repeated) something else,
	// which no field read here ever is.
	field := func(k string) string {
		var s string
		if json.Unmarshal(raw[k], &s) != nil {
			return ""
		}
		return s
	}
	if field("MESSAGE_ID") != string(eventlog.Decision) || field("FLEXIQ_POOL") != pool {
		return Point{}, false, false, nil
	}
	if field("_SYSTEMD_UNIT") != DaemonUnit || field("_UID") != daemonUID {
		return Point{}, false, true, nil
	}
	us, err := strconv.ParseInt(field("__REALTIME_TIMESTAMP"), 10, 64)
	if err != nil {
		return Point{}, false, false, fmt.Errorf("__REALTIME_TIMESTAMP: %w", err)
	}
	p = Point{Time: time.UnixMicro(us), Action: field("FLEXIQ_ACTION")}
	p.Live, _ = strconv.Atoi(field("FLEXIQ_CURRENT"))
	p.Target, _ = strconv.Atoi(field("FLEXIQ_DESIRED"))
	if s := field("FLEXIQ_PENDING"); s != "" {
		p.Pending, _ = strconv.ParseInt(s, 10, 64)
		p.Running, _ = strconv.ParseInt(field("FLEXIQ_RUNNING"), 10, 64)
		p.Known = true
	}
	return p, true, false, nil
}

// WriteCSV writes the series, one row a decision, for a spreadsheet.
func WriteCSV(w io.Writer, pts []Point) error {
	cw := csv.NewWriter(w)
	cw.Write(csvHeader)
	for _, p := range pts {
		pending, running := "", ""
		if p.Known {
			pending, running = strconv.FormatInt(p.Pending, 10), strconv.FormatInt(p.Running, 10)
		}
		cw.Write([]string{p.Time.UTC().Format(time.RFC3339Nano), pending, running,
			strconv.Itoa(p.Live), strconv.Itoa(p.Target), p.Action})
	}
	cw.Flush()
	return cw.Error()
}

// csvHeader is the header row that WriteCSV writes and ReadCSV expects.
var csvHeader = []string{"time", "pending", "running", "live", "target", "action"}

// ReadCSV reads back what WriteCSV wrote: the series cross a pipe to the
// plotting helper this way. An error names the row and the column.
func ReadCSV(r io.Reader) ([]Point, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(csvHeader)
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("CSV header: %w", err)
	}
	if strings.Join(head, ",") != strings.Join(csvHeader, ",") {
		return nil, fmt.Errorf("CSV header %q, want %q", strings.Join(head, ","), strings.Join(csvHeader, ","))
	}
	var pts []Point
	for row := 2; ; row++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return pts, nil
		}
		if err != nil {
			return nil, fmt.Errorf("CSV: %w", err)
		}
		p := Point{Action: rec[5]}
		bad := func(col int, err error) error {
			return fmt.Errorf("CSV row %d, column %s: %q: %w", row, csvHeader[col], rec[col], err)
		}
		if p.Time, err = time.Parse(time.RFC3339Nano, rec[0]); err != nil {
			return nil, bad(0, err)
		}
		// The counts are both empty when the source could not be read.
		if rec[1] != "" || rec[2] != "" {
			p.Known = true
			if p.Pending, err = strconv.ParseInt(rec[1], 10, 64); err != nil {
				return nil, bad(1, err)
			}
			if p.Running, err = strconv.ParseInt(rec[2], 10, 64); err != nil {
				return nil, bad(2, err)
			}
		}
		if p.Live, err = strconv.Atoi(rec[3]); err != nil {
			return nil, bad(3, err)
		}
		if p.Target, err = strconv.Atoi(rec[4]); err != nil {
			return nil, bad(4, err)
		}
		pts = append(pts, p)
	}
}

// at is the last point at or before t: the journal writes a decision when
// it changes, so the series are steps.
func at(pts []Point, t time.Time) (Point, bool) {
	var last Point
	found := false
	for _, p := range pts {
		if p.Time.After(t) {
			break
		}
		last, found = p, true
	}
	return last, found
}

var bars = []rune("▁▂▃▄▅▆▇█")

// Chart draws the series as text, width columns wide: the workers (live
// '#', target '-' where it differs) over height rows, a row of scale events
// ('^' up, 'v' down), and the pending jobs as a bar row.
func Chart(w io.Writer, pts []Point, width, height int) {
	if len(pts) == 0 {
		fmt.Fprintln(w, "no decisions in this period")
		return
	}
	width, height = max(width, 10), max(height, 3)
	start, end := pts[0].Time, pts[len(pts)-1].Time
	if !end.After(start) {
		end = start.Add(time.Second)
	}
	step := end.Sub(start) / time.Duration(width-1)
	maxW, maxP := 1, int64(1)
	for _, p := range pts {
		maxW = max(maxW, p.Live, p.Target)
		maxP = max(maxP, p.Pending)
	}
	cols := make([]Point, width)
	events := make([]rune, width)
	for i := range cols {
		t := start.Add(time.Duration(i) * step)
		cols[i], _ = at(pts, t)
		events[i] = ' '
	}
	for _, p := range pts {
		i := min(width-1, int(p.Time.Sub(start)/max(step, 1)))
		switch p.Action {
		case "scale-up":
			events[i] = '^'
		case "scale-down":
			events[i] = 'v'
		}
	}
	row := func(v int) int { return int(math.Round(float64(v) * float64(height-1) / float64(maxW))) }
	for r := height - 1; r >= 0; r-- {
		label := "    "
		if r == height-1 || r == 0 {
			label = fmt.Sprintf("%4d", int(math.Round(float64(r)*float64(maxW)/float64(height-1))))
		}
		var b strings.Builder
		for _, c := range cols {
			switch {
			case row(c.Live) >= r && (r > 0 || c.Live > 0):
				b.WriteByte('#')
			case row(c.Target) == r:
				b.WriteByte('-')
			default:
				b.WriteByte(' ')
			}
		}
		fmt.Fprintf(w, "%s |%s\n", label, b.String())
	}
	fmt.Fprintf(w, "     |%s  scale events (^ up, v down)\n", string(events))
	var pb strings.Builder
	for _, c := range cols {
		if !c.Known {
			pb.WriteRune(' ')
			continue
		}
		pb.WriteRune(bars[int(math.Round(float64(c.Pending)*float64(len(bars)-1)/float64(maxP)))])
	}
	fmt.Fprintf(w, "     |%s  pending (max %d)\n", pb.String(), maxP)
	fmt.Fprintf(w, "      %s%*s\n", start.Local().Format("15:04:05"), width-8, end.Local().Format("15:04:05"))
	fmt.Fprintln(w, "workers: # live, - target")
}
