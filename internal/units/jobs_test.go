package units_test

import (
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestQueuedJob(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	const a, b, c = "flexiq-qj-a.service", "flexiq-qj-b.service", "flexiq-qj-c.service"
	for _, u := range []string{a, b, c} {
		t.Cleanup(func() { removeUnit(t, sb, u) })
	}
	// c runs, with a slow ExecStop, so a restart job stays in its stop half.
	if _, err := sb.Exec(ctx, "systemd-run", "--unit="+c, "-p", "ExecStop=/bin/sleep 3", "/bin/sleep", "1000"); err != nil {
		t.Fatal(err)
	}
	// a's start job runs for 3 s; b's waits for it (After=).
	for _, argv := range [][]string{
		{"systemd-run", "--no-block", "--unit=" + a, "-p", "Type=oneshot", "/bin/sleep", "3"},
		{"systemd-run", "--no-block", "--unit=" + b, "-p", "After=" + a, "/bin/sleep", "1000"},
		{"systemctl", "restart", "--no-block", c},
	} {
		if _, err := sb.Exec(ctx, argv...); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		unit, jobType string
		want          bool
	}{
		{a, "start", true},   // running
		{b, "start", true},   // waiting
		{b, "stop", false},   // no such job
		{c, "restart", true}, // the daemon's SIGTERM case
		{c, "stop", false},   // a restart is not a stop
		{"flexiq-qj-none.service", "start", false},
	} {
		got, err := m.QueuedJob(ctx, tc.unit, tc.jobType)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			out, _ := sb.Exec(ctx, "systemctl", "list-jobs")
			t.Errorf("QueuedJob(%s, %s) = %v, want %v; jobs:\n%s", tc.unit, tc.jobType, got, tc.want, out)
		}
	}
	// Once a has finished, b's job is gone too.
	waitFor(t, ctx, "b's start job to finish", func() bool {
		got, err := m.QueuedJob(ctx, b, "start")
		return err == nil && !got
	})
}
