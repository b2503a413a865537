package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/workload"
)

// simulate --svg hands the run to the plot helper: the ticks as CSV on its
// standard input, SVG whatever the file's name, the summary in the title.
// A stand-in helper records what it is given.
func TestDrawRunHelper(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, plotHelper)
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + dir + "/args\ncat > " + dir + "/stdin\n"
	if err := os.WriteFile(helper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ticks := []workload.Tick{{T: 0, Pending: 3, Running: 1, Current: 1}, {T: 1.5, Running: 2, Current: 2, Draining: 1}}
	r := workload.Result{WorkerSeconds: 42, Floor: 7, Actions: 2, Peak: 3}
	if err := drawRun(helper, "-run.png", "pool p", ticks, r); err != nil {
		t.Fatal(err)
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args"))
	want := "--run\n--format\nsvg\n--title\npool p\nworker-seconds 42 (floor 7), wait p50 0.00 s p95 0.00 s p99 0.00 s, 2 actions, peak 3 workers\n--\n-run.png\n"
	if string(args) != want {
		t.Errorf("helper args\n%s\nwant\n%s", args, want)
	}
	stdin, _ := os.ReadFile(filepath.Join(dir, "stdin"))
	if want := "t,pending,running,live,draining\n0,3,1,1,0\n1.5,0,2,2,1\n"; string(stdin) != want {
		t.Errorf("helper stdin %q, want %q", stdin, want)
	}
	if err := os.WriteFile(helper, []byte("#!/bin/sh\necho 'flexiq-scaled-plot: no ticks to draw' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := drawRun(helper, "x.svg", "t", ticks, r); err == nil || err.Error() != "draw x.svg: no ticks to draw" {
		t.Errorf("helper's failure: %v", err)
	}
}
