package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// history draws a known sequence of decision entries, written to the
// journal with the daemon's fields (logger --journald), into the expected
// series.
func TestHistoryFromJournal(t *testing.T) {
	e := setup(t)
	pool := fmt.Sprintf("hist%d", time.Now().UnixNano()%1_000_000)
	for _, d := range []struct {
		action                          string
		current, desired, pending, runs int
	}{
		{"scale-up", 1, 3, 30, 4},
		{"stable", 3, 3, 5, 6},
		{"scale-down", 3, 1, 0, 1},
	} {
		e.sh(fmt.Sprintf("printf '%%s\\n' MESSAGE_ID=4f1c1e0c5e7a4e3c9b7c2d5e8a1f6b01 'MESSAGE=pool=%[1]s test decision' "+
			"FLEXIQ_POOL=%[1]s FLEXIQ_ACTION=%[2]s FLEXIQ_CURRENT=%[3]d FLEXIQ_DESIRED=%[4]d FLEXIQ_PENDING=%[5]d FLEXIQ_RUNNING=%[6]d "+
			"| logger --journald; sleep 0.2", pool, d.action, d.current, d.desired, d.pending, d.runs))
	}
	want := []string{",30,4,1,3,scale-up", ",5,6,3,3,stable", ",0,1,3,1,scale-down"}
	e.eventually(10*time.Second, "the three entries in history --csv", func() (bool, string) {
		out, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m", "--csv")
		rows := strings.Split(strings.TrimSpace(out), "\n")
		if code != 0 || len(rows) != 4 {
			return false, fmt.Sprintf("exit %d, %q %q", code, out, errs)
		}
		for i, w := range want {
			if !strings.HasSuffix(rows[i+1], w) {
				return false, fmt.Sprintf("row %d %q, want ...%s", i+1, rows[i+1], w)
			}
		}
		return rows[0] == "time,pending,running,live,target,action", out
	})
	chart, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m", "--width", "40")
	if code != 0 || !strings.Contains(chart, "3 decisions") || !strings.Contains(chart, "^") ||
		!strings.Contains(chart, "v  scale events") || !strings.Contains(chart, "pending (max 30)") {
		t.Errorf("chart: exit %d\n%s%s", code, chart, errs)
	}
	t.Logf("history chart:\n%s", chart)

	out, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m", "--svg", "/var/tmp/history.svg")
	if code != 0 {
		t.Fatalf("history --svg: exit %d\n%s%s", code, out, errs)
	}
	svg := e.sh("cat /var/tmp/history.svg")
	for _, want := range []string{"<svg", "pending", "live workers", "target", "scale-up", "scale-down"} {
		if !strings.Contains(svg, want) {
			t.Errorf("SVG lacks %q", want)
		}
	}
	if n := strings.Count(svg, "<path"); n < 3 {
		t.Errorf("SVG has %d paths, want one per series at least", n)
	}

	// Without its helper, drawing fails with a message that says where the
	// helper was looked for; the text chart does not need it.
	helper := "/usr/libexec/flexiq-scaled/flexiq-scaled-plot"
	e.sh("mv " + helper + " " + helper + ".away")
	t.Cleanup(func() { e.sh("mv " + helper + ".away " + helper) })
	out, errs, code = e.run("flexiq-scaled", "history", pool, "--since", "10m", "--png", "/var/tmp/history.png")
	if code == 0 || !strings.Contains(errs, "drawing needs flexiq-scaled-plot, which is in neither /usr/bin/flexiq-scaled-plot nor "+helper) {
		t.Errorf("history --png without the helper: exit %d\n%s%s", code, out, errs)
	}
	if _, errs, code := e.run("flexiq-scaled", "history", pool, "--since", "10m"); code != 0 {
		t.Errorf("history without the helper: exit %d\n%s", code, errs)
	}
}
