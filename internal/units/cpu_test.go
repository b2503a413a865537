package units_test

import (
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/units"
	"github.com/flexiq/flexiq-scaled/test/sandbox"
)

func TestCPUUsage(t *testing.T) {
	t.Parallel()
	sb := sandbox.Get(t)
	ctx := testContext(t, 30*time.Second)
	m := newManager(t, sb)

	burner := start(t, ctx, m, sb, units.WorkerSpec{Pool: "cpu", Slot: 1, Exec: []string{"/bin/sh", "-c", "while :; do :; done"}})
	idler := start(t, ctx, m, sb, sleeper("cpu", 2))
	wb, _ := listed(t, ctx, m, "cpu", burner)
	wi, _ := listed(t, ctx, m, "cpu", idler)

	usage := func(w units.Worker) time.Duration {
		t.Helper()
		d, err := m.CPUUsage(w)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	b0, i0 := usage(wb), usage(wi)
	const window = 800 * time.Millisecond
	time.Sleep(window)
	b1, i1 := usage(wb), usage(wi)
	// A spinning shell gets most of a CPU; leave room for a busy host.
	if d := b1 - b0; d < window/4 || d > 2*window {
		t.Errorf("burner used %v of CPU in %v", d, window)
	}
	// The sleeper's total is its start-up (systemd's set-up and exec run in
	// its cgroup); after that it should use next to nothing.
	if d := i1 - i0; i1 > 200*time.Millisecond || d > 20*time.Millisecond {
		t.Errorf("sleeper used %v of CPU in %v, %v in total", d, window, i1)
	}
	t.Logf("burner: %v in %v; sleeper: %v in %v, %v in total", b1-b0, window, i1-i0, window, i1)

	removeUnit(t, sb, burner)
	if d, err := m.CPUUsage(wb); err == nil {
		t.Errorf("CPUUsage of a stopped worker = %v, want an error (cgroup gone)", d)
	}
	if _, err := m.CPUUsage(units.Worker{Unit: "flexiq-cpu@9.service"}); err == nil {
		t.Error("CPUUsage without a control group succeeded")
	}
}
