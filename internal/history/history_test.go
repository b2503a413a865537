package history

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
	"time"
)

const decision = "4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01"

func ts(t int) string { return strconv.FormatInt(int64(1_800_000_000+t)*1_000_000, 10) }

// daemon is the trusted fields journald gives the daemon's entries.
const daemon = `,"_SYSTEMD_UNIT":"flexiq-scaled.service","_UID":"0"`

func line(pool string, t int, fields string) string {
	return `{"__REALTIME_TIMESTAMP":"` + ts(t) + `","MESSAGE_ID":"` + decision + `","FLEXIQ_POOL":"` + pool + `"` + daemon + fields + "}\n"
}

func TestParse(t *testing.T) {
	in := line("email", 0, `,"FLEXIQ_ACTION":"scale-up","FLEXIQ_CURRENT":"1","FLEXIQ_DESIRED":"3","FLEXIQ_PENDING":"30","FLEXIQ_RUNNING":"4"`) +
		line("other", 1, `,"FLEXIQ_ACTION":"scale-up","FLEXIQ_CURRENT":"0","FLEXIQ_DESIRED":"9"`) +
		`{"__REALTIME_TIMESTAMP":"` + ts(2) + `","MESSAGE_ID":"4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b02","FLEXIQ_POOL":"email"}` + "\n" +
		line("email", 10, `,"FLEXIQ_ACTION":"stable","FLEXIQ_CURRENT":"3","FLEXIQ_DESIRED":"3","FLEXIQ_PENDING":"5","FLEXIQ_RUNNING":"6","MESSAGE":[1,2]`) +
		"\n" +
		line("email", 20, `,"FLEXIQ_ACTION":"scale-down","FLEXIQ_CURRENT":"3","FLEXIQ_DESIRED":"1"`)
	pts, _, err := Parse(strings.NewReader(in), "email")
	if err != nil {
		t.Fatal(err)
	}
	want := []Point{
		{Time: time.Unix(1_800_000_000, 0), Pending: 30, Running: 4, Known: true, Live: 1, Target: 3, Action: "scale-up"},
		{Time: time.Unix(1_800_000_010, 0), Pending: 5, Running: 6, Known: true, Live: 3, Target: 3, Action: "stable"},
		{Time: time.Unix(1_800_000_020, 0), Live: 3, Target: 1, Action: "scale-down"},
	}
	if len(pts) != len(want) {
		t.Fatalf("got %d points %+v, want %d", len(pts), pts, len(want))
	}
	for i := range want {
		if !pts[i].Time.Equal(want[i].Time) || pts[i].Pending != want[i].Pending || pts[i].Running != want[i].Running ||
			pts[i].Known != want[i].Known || pts[i].Live != want[i].Live || pts[i].Target != want[i].Target || pts[i].Action != want[i].Action {
			t.Errorf("point %d = %+v, want %+v", i, pts[i], want[i])
		}
	}

	var csv bytes.Buffer
	if err := WriteCSV(&csv, pts); err != nil {
		t.Fatal(err)
	}
	wantCSV := "time,pending,running,live,target,action\n" +
		"2027-01-15T08:00:00Z,30,4,1,3,scale-up\n" +
		"2027-01-15T08:00:10Z,5,6,3,3,stable\n" +
		"2027-01-15T08:00:20Z,,,3,1,scale-down\n"
	if csv.String() != wantCSV {
		t.Errorf("CSV\n%s\nwant\n%s", csv.String(), wantCSV)
	}
	// ReadCSV gives the same points back.
	back, err := ReadCSV(strings.NewReader(wantCSV))
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(pts) {
		t.Fatalf("ReadCSV: %d points, want %d", len(back), len(pts))
	}
	for i := range pts {
		if !back[i].Time.Equal(pts[i].Time) || back[i].Pending != pts[i].Pending || back[i].Running != pts[i].Running ||
			back[i].Known != pts[i].Known || back[i].Live != pts[i].Live || back[i].Target != pts[i].Target || back[i].Action != pts[i].Action {
			t.Errorf("ReadCSV point %d = %+v, want %+v", i, back[i], pts[i])
		}
	}

	var chart bytes.Buffer
	Chart(&chart, pts, 21, 4)
	out := chart.String()
	events := ""
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "scale events") {
			events = l
		}
	}
	// Up at the first column, down at the last.
	if !strings.Contains(events, "|^") || !strings.Contains(events, "v  scale events") {
		t.Errorf("events row %q\n%s", events, out)
	}
	if !strings.Contains(out, "pending (max 30)") || !strings.Contains(out, "#") {
		t.Errorf("chart:\n%s", out)
	}
}

func TestParseBadLine(t *testing.T) {
	if _, _, err := Parse(strings.NewReader("{\"a\":1}\nnot json\n"), "x"); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("error %v, want one naming line 2", err)
	}
}

func TestJournalArgs(t *testing.T) {
	got := strings.Join(JournalArgs("email", "-3600s", ""), " ")
	if got != "--no-pager -o json MESSAGE_ID="+decision+" FLEXIQ_POOL=email _SYSTEMD_UNIT=flexiq-scaled.service _UID=0 --since -3600s" {
		t.Errorf("args %q", got)
	}
}

func TestReadCSVErrors(t *testing.T) {
	const head = "time,pending,running,live,target,action\n"
	for _, c := range []struct{ in, want string }{
		{"", "CSV header: EOF"},
		{"time,pending\n", "wrong number of fields"},
		{"when,pending,running,live,target,action\n", `CSV header "when,pending,running,live,target,action"`},
		{head + "yesterday,1,2,3,4,stable\n", `CSV row 2, column time: "yesterday"`},
		{head + "2027-01-15T08:00:00Z,x,2,3,4,stable\n", `CSV row 2, column pending: "x"`},
		{head + "2027-01-15T08:00:00Z,1,,3,4,stable\n", `CSV row 2, column running: ""`},
		{head + "2027-01-15T08:00:00Z,1,2,3,4,stable\n2027-01-15T08:00:01Z,1,2,three,4,stable\n", `CSV row 3, column live: "three"`},
		{head + "2027-01-15T08:00:00Z,1,2,3,-,stable\n", `CSV row 2, column target: "-"`},
		{head + "2027-01-15T08:00:00Z,1,2,3\n", "wrong number of fields"},
	} {
		_, err := ReadCSV(strings.NewReader(c.in))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("ReadCSV(%q) = %v, want an error with %q", c.in, err, c.want)
		}
	}
}

// Only the daemon's own entries are charted: one forged by another user
// (logger --journald as uid 1000) or another unit is skipped and counted,
// whatever it claims; a line too long to be a decision is skipped without
// ending the read.
func TestParseForeignAndLong(t *testing.T) {
	forged := func(trusted string) string {
		return `{"__REALTIME_TIMESTAMP":"` + ts(5) + `","MESSAGE_ID":"` + decision + `","FLEXIQ_POOL":"email"` + trusted +
			`,"FLEXIQ_ACTION":"scale-up","FLEXIQ_CURRENT":"1","FLEXIQ_DESIRED":"500","FLEXIQ_PENDING":"9999","FLEXIQ_RUNNING":"0"}` + "\n"
	}
	long := `{"__REALTIME_TIMESTAMP":"` + ts(6) + `","MESSAGE_ID":"` + decision + `","FLEXIQ_POOL":"email"` + daemon +
		`,"MESSAGE":"` + strings.Repeat("x", 5<<20) + `"}` + "\n"
	for _, tc := range []struct {
		name          string
		in            string
		foreign, lang int
	}{
		{"uid 1000 in a session", forged(`,"_UID":"1000","_SYSTEMD_UNIT":"session-3.scope"`), 1, 0},
		{"uid 1000 claiming the unit as a plain field", forged(`,"_UID":"1000","SYSTEMD_UNIT":"flexiq-scaled.service"`), 1, 0},
		{"root in another unit", forged(`,"_UID":"0","_SYSTEMD_UNIT":"cron.service"`), 1, 0},
		{"the daemon's unit, not as root", forged(`,"_UID":"1000","_SYSTEMD_UNIT":"flexiq-scaled.service"`), 1, 0},
		{"no trusted fields", forged(``), 1, 0},
		{"a line over 4 MiB", long, 0, 1},
		{"a line over 4 MiB, last, no newline", strings.TrimSuffix(long, "\n"), 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := line("email", 0, `,"FLEXIQ_ACTION":"stable","FLEXIQ_CURRENT":"2","FLEXIQ_DESIRED":"2"`) + tc.in +
				line("email", 10, `,"FLEXIQ_ACTION":"scale-down","FLEXIQ_CURRENT":"2","FLEXIQ_DESIRED":"1"`)
			if strings.HasSuffix(tc.name, "no newline") {
				in = line("email", 0, `,"FLEXIQ_ACTION":"stable","FLEXIQ_CURRENT":"2","FLEXIQ_DESIRED":"2"`) + tc.in
			}
			pts, skipped, err := Parse(strings.NewReader(in), "email")
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range pts {
				if p.Target == 500 || p.Pending == 9999 {
					t.Errorf("forged point charted: %+v", p)
				}
			}
			if want := 2; strings.HasSuffix(tc.name, "no newline") {
				want = 1
				if len(pts) != want {
					t.Errorf("%d points, want %d", len(pts), want)
				}
			} else if len(pts) != want {
				t.Errorf("%d points, want %d", len(pts), want)
			}
			if skipped.Foreign != tc.foreign || skipped.Long != tc.lang {
				t.Errorf("skipped %+v, want %d foreign, %d long", skipped, tc.foreign, tc.lang)
			}
		})
	}
}
