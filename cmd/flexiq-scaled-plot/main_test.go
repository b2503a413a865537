package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const series = "time,pending,running,live,target,action\n" +
	"2027-01-15T08:00:00Z,30,4,1,3,scale-up\n" +
	"2027-01-15T08:00:10Z,5,6,3,3,stable\n" +
	"2027-01-15T08:00:20Z,,,3,1,scale-down\n"

// What flexiq-scaled simulate --svg sends with --run.
const ticks = "t,pending,running,live,draining\n0,30,1,1,0\n5,12,4,4,1\n10,0,2,2,0\n"

func TestRun(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name     string
		args     []string
		stdin    string
		code     int
		stderr   string
		wantFile string
	}{
		{"svg", []string{"--title", "pool email", filepath.Join(dir, "h.svg")}, series, 0, "", "pool email"},
		{"png", []string{filepath.Join(dir, "h.png")}, series, 0, "", "\x89PNG"},
		{"no file", nil, series, 2, "usage:", ""},
		{"two files", []string{"a.svg", "b.svg"}, series, 2, "usage:", ""},
		{"bad flag", []string{"--colour", "red", "a.svg"}, series, 2, "flag provided but not defined", ""},
		{"bad CSV", []string{filepath.Join(dir, "x.svg")}, "time,pending\n", 1, "flexiq-scaled-plot: CSV header", ""},
		{"no decisions", []string{filepath.Join(dir, "y.svg")}, "time,pending,running,live,target,action\n", 1, "no decisions to draw", ""},
		{"gif", []string{filepath.Join(dir, "h.gif")}, series, 1, "want a .svg or .png file", ""},
		{"run", []string{"--run", "--format", "svg", "--title", "pool code", filepath.Join(dir, "run.png")}, ticks, 0, "", "live + draining"},
		{"run png", []string{"--run", filepath.Join(dir, "run2.png")}, ticks, 0, "", "\x89PNG"},
		{"run, history CSV", []string{"--run", filepath.Join(dir, "r.svg")}, series, 1, "flexiq-scaled-plot: ticks CSV header", ""},
		{"format without run", []string{"--format", "svg", filepath.Join(dir, "f.svg")}, series, 1, "--format is for --run only", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stderr bytes.Buffer
			if code := run(c.args, strings.NewReader(c.stdin), &stderr); code != c.code {
				t.Fatalf("exit %d, want %d; stderr %s", code, c.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr %q, want %q", stderr.String(), c.stderr)
			}
			if c.wantFile != "" {
				b, err := os.ReadFile(c.args[len(c.args)-1])
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Contains(b, []byte(c.wantFile)) {
					t.Errorf("the picture lacks %q", c.wantFile)
				}
			}
		})
	}
}

// flexiq-scaled history passes the file after "--", so that a file whose
// name begins with a dash is drawn, not taken for a flag.
func TestRunDashFile(t *testing.T) {
	t.Chdir(t.TempDir())
	var stderr bytes.Buffer
	if code := run([]string{"--title", "t", "--", "-h.svg"}, strings.NewReader(series), &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if _, err := os.Stat("-h.svg"); err != nil {
		t.Error(err)
	}
}
