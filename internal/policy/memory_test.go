package policy

import (
	"testing"
	"time"
)

func TestMemoryRoundTrip(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		in   Memory
		want Memory
	}{
		{"kept", Memory{ServiceTime: 2 * time.Second, LastWork: now.Add(-time.Second), Worked: true}, Memory{ServiceTime: 2 * time.Second, LastWork: now.Add(-time.Second), Worked: true}},
		{"work in the future is dropped", Memory{ServiceTime: time.Second, LastWork: now.Add(time.Second), Worked: true}, Memory{ServiceTime: time.Second}},
		{"a negative service time reads as none", Memory{ServiceTime: -time.Second}, Memory{}},
		{"empty", Memory{}, Memory{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r Recommender
			r.RestoreMemory(now, tt.in)
			if got := r.Memory(); got != tt.want {
				t.Errorf("Memory = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The memory restored arms the keep-warm floor as the live one would.
func TestMemoryArmsKeepWarm(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Params{MinWorkers: 1, MaxWorkers: 10, TargetQueueDepthPerWorker: 10, TargetUtilisation: 1, ThreadsPerWorker: 1,
		KeepWarmWorkers: 4, KeepWarm: time.Minute}
	var r Recommender
	r.RestoreMemory(now, Memory{LastWork: now.Add(-10 * time.Second), Worked: true})
	d := r.Decide(now, p, Observation{Valid: true, Current: 6})
	if !d.KeepWarmUsed || d.Desired != 4 {
		t.Errorf("decision %+v: want the keep-warm floor 4", d)
	}
}
