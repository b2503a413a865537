package hostload

import (
	"math"
	"testing"
	"time"

	"github.com/prometheus/procfs"
)

func TestBusy(t *testing.T) {
	base := procfs.CPUStat{User: 100, System: 50, Idle: 800, Iowait: 50}
	tests := []struct {
		name string
		next procfs.CPUStat
		want float64
		ok   bool
	}{
		{"all idle", procfs.CPUStat{User: 100, System: 50, Idle: 900, Iowait: 50}, 0, true},
		{"half busy", procfs.CPUStat{User: 150, System: 50, Idle: 850, Iowait: 50}, 0.5, true},
		{"iowait is idle", procfs.CPUStat{User: 100, System: 50, Idle: 800, Iowait: 150}, 0, true},
		{"steal and irq are busy", procfs.CPUStat{User: 100, System: 50, Idle: 850, Iowait: 50, Steal: 25, IRQ: 25}, 0.5, true},
		{"guest is in user already", procfs.CPUStat{User: 200, System: 50, Idle: 800, Iowait: 50, Guest: 100}, 1, true},
		{"no time passed", base, 0, false},
		{"counters went backwards", procfs.CPUStat{User: 10, Idle: 10}, 0, false},
		{"a CPU taken offline: totals fell, though user grew", procfs.CPUStat{User: 120, System: 40, Idle: 500, Iowait: 40}, 0, false},
		{"iowait went backwards counts as none", procfs.CPUStat{User: 150, System: 50, Idle: 900, Iowait: 0}, 1.0 / 3, true},
	}
	for _, tt := range tests {
		got, ok := busy(base, tt.next)
		if ok != tt.ok || math.Abs(got-tt.want) > 1e-9 {
			t.Errorf("%s: busy = %g %t, want %g %t", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

func TestRead(t *testing.T) {
	r, err := New("testdata/proc")
	if err != nil {
		t.Fatal(err)
	}
	first := r.Read()
	if first.CPUKnown || first.CPUErr != nil {
		t.Errorf("first read: cpu known %t (%v), want unknown without error: there is no delta yet", first.CPUKnown, first.CPUErr)
	}
	if !first.PSIKnown || first.PSICPU != 12.5 || first.PSIMemory != 1.25 {
		t.Errorf("psi = %+v, want cpu 12.5 memory 1.25", first)
	}
	if !first.MemKnown || first.MemAvailable != 2048000*1024 {
		t.Errorf("mem_available = %d %t, want 2048000 KiB", first.MemAvailable, first.MemKnown)
	}
	// The fixture does not move: no time passed, no reading.
	if second := r.Read(); second.CPUKnown {
		t.Errorf("second read of an unchanged /proc/stat: cpu %g known", second.CPU)
	}

	r, err = New("testdata/nopsi")
	if err != nil {
		t.Fatal(err)
	}
	got := r.Read()
	if got.PSIKnown || got.PSIErr == nil {
		t.Errorf("a kernel without /proc/pressure: psi known %t, err %v; want unknown with the reason", got.PSIKnown, got.PSIErr)
	}
	if !got.MemKnown {
		t.Errorf("memory unknown: %v", got.MemErr)
	}
}

// On the machine running the test, two reads give a share of the CPUs once
// /proc/stat has advanced, which takes at least one clock tick (10 ms at
// USER_HZ 100): a fast machine can burn less than that between two reads, so
// the test reads until the counters moved instead of assuming they did.
func TestReadLive(t *testing.T) {
	r, err := New(procfs.DefaultMountPoint)
	if err != nil {
		t.Skip(err)
	}
	r.Read()
	var got Reading
	burn := 0
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		for i := 0; i < 20_000_000; i++ {
			burn += i
		}
		if got = r.Read(); got.CPUKnown || got.CPUErr != nil {
			break
		}
	}
	if got.CPUErr != nil || !got.CPUKnown || got.CPU < 0 || got.CPU > 1 {
		t.Errorf("live read: cpu %g known %t err %v (burn %d)", got.CPU, got.CPUKnown, got.CPUErr, burn)
	}
}
