package policy

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestEWMAAsymmetric(t *testing.T) {
	tests := []struct {
		name string
		raws []float64
		want float64
	}{
		{"first reading is the average", []float64{0.4}, 0.4},
		{"a rise is believed at half weight", []float64{0.2, 1.0}, 0.6},
		{"a fall at a tenth", []float64{1.0, 0.0}, 0.9},
		{"two falls", []float64{1.0, 0.0, 0.0}, 0.81},
		{"rise then fall", []float64{0.0, 1.0, 0.0}, 0.45},
		{"steady", []float64{0.5, 0.5, 0.5}, 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e EWMA
			var got float64
			for _, r := range tt.raws {
				got = e.Update(r, 0.5, 0.1)
			}
			if math.Abs(got-tt.want) > 1e-9 {
				t.Errorf("EWMA of %v = %g, want %g", tt.raws, got, tt.want)
			}
		})
	}
}

func TestJudge(t *testing.T) {
	def := DefaultGuardParams()
	psi := def
	psi.PSICPUMax, psi.PSICPUEmergency, psi.PSIMemoryMax = 20, 60, 10
	mem := def
	mem.MemAvailableMin, mem.MemAvailableEmergency = 1<<30, 256<<20
	cpu := func(raw, ema float64) HostState {
		return HostState{Reading: HostReading{CPU: raw, CPUKnown: true}, EMA: ema}
	}
	tests := []struct {
		name             string
		p                GuardParams
		h                HostState
		block, emergency bool
		reason           string
	}{
		{"idle host", def, cpu(0.1, 0.1), false, false, ""},
		{"just below headroom", def, cpu(0.64, 0.64), false, false, ""},
		{"raw at the limit blocks", def, cpu(0.65, 0.3), true, false, "host cpu 0.65 >= host_cpu_scale_up_max"},
		{"average at the limit blocks though raw fell", def, cpu(0.2, 0.7), true, false, "host cpu average 0.70"},
		{"at the emergency threshold is not yet one", def, cpu(0.88, 0.5), true, false, ""},
		{"raw spike above emergency", def, cpu(0.95, 0.5), true, true, "host cpu 0.95 > host_cpu_emergency 0.88"},
		{"average above emergency, raw below", def, cpu(0.5, 0.9), true, true, "host cpu 0.90 > host_cpu_emergency"},
		{"unknown cpu judges nothing", def, HostState{EMA: 0.99}, false, false, ""},
		{"psi cpu blocks", psi, HostState{Reading: HostReading{PSIKnown: true, PSICPU: 25}}, true, false, "psi_cpu 25.0 >= psi_cpu_max 20.0"},
		{"psi cpu emergency", psi, HostState{Reading: HostReading{PSIKnown: true, PSICPU: 61}}, true, true, "psi_cpu_emergency"},
		{"psi memory blocks", psi, HostState{Reading: HostReading{PSIKnown: true, PSIMemory: 10}}, true, false, "psi_memory 10.0 >= psi_memory_max"},
		{"psi off by default", def, HostState{Reading: HostReading{PSIKnown: true, PSICPU: 99, PSIMemory: 99}}, false, false, ""},
		{"psi unknown (old kernel)", psi, HostState{Reading: HostReading{PSICPU: 99}}, false, false, ""},
		{"memory floor blocks", mem, HostState{Reading: HostReading{MemKnown: true, MemAvailable: 512 << 20}}, true, false, "mem_available 512MiB < mem_available_min 1024MiB"},
		{"memory emergency", mem, HostState{Reading: HostReading{MemKnown: true, MemAvailable: 100 << 20}}, true, true, "mem_available_emergency"},
		{"plenty of memory", mem, HostState{Reading: HostReading{MemKnown: true, MemAvailable: 8 << 30}}, false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := Judge(tt.p, tt.h)
			if v.BlockUp != tt.block || v.Emergency != tt.emergency {
				t.Errorf("Judge = block %t emergency %t, want %t %t (%v)", v.BlockUp, v.Emergency, tt.block, tt.emergency, v.Reasons)
			}
			if tt.reason != "" && !strings.Contains(strings.Join(v.Reasons, "; "), tt.reason) {
				t.Errorf("reasons %q, want one containing %q", v.Reasons, tt.reason)
			}
		})
	}
}

func TestVictimPool(t *testing.T) {
	tests := []struct {
		name  string
		pools []PoolLoad
		want  string
	}{
		{"none", nil, ""},
		{"all at their minimum", []PoolLoad{{Name: "a", Live: 1, Min: 1}, {Name: "b", Live: 0, Min: 0}}, ""},
		{"lowest priority first", []PoolLoad{{Name: "a", Priority: 5, Live: 9, Min: 0}, {Name: "b", Priority: 1, Live: 2, Min: 1}}, "b"},
		{"a pool at its minimum is skipped", []PoolLoad{{Name: "a", Priority: 0, Live: 2, Min: 2}, {Name: "b", Priority: 9, Live: 3, Min: 1}}, "b"},
		{"ties to the most above minimum", []PoolLoad{{Name: "a", Live: 5, Min: 4}, {Name: "b", Live: 4, Min: 1}}, "b"},
		{"then by name", []PoolLoad{{Name: "z", Live: 3, Min: 1}, {Name: "m", Live: 2, Min: 0}}, "m"},
		{"negative priorities sort lowest", []PoolLoad{{Name: "a", Priority: 0, Live: 3}, {Name: "b", Priority: -1, Live: 1}}, "b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := VictimPool(tt.pools)
			if got != tt.want || ok != (tt.want != "") {
				t.Errorf("Victim = %q %t, want %q", got, ok, tt.want)
			}
		})
	}
}

func TestEmergencyDue(t *testing.T) {
	t0 := time.Unix(1000, 0)
	for _, tt := range []struct {
		last time.Time
		now  time.Time
		want bool
	}{
		{time.Time{}, t0, true},
		{t0, t0.Add(89 * time.Second), false},
		{t0, t0.Add(90 * time.Second), true},
	} {
		if got := EmergencyDue(tt.now, tt.last, 90*time.Second); got != tt.want {
			t.Errorf("EmergencyDue(now=%v, last=%v) = %t, want %t", tt.now, tt.last, got, tt.want)
		}
	}
}

func TestApplyGuard(t *testing.T) {
	p := Params{MinWorkers: 1, MaxWorkers: 10}
	block := Verdict{BlockUp: true, Reasons: []string{"host cpu 0.70 >= host_cpu_scale_up_max 0.65"}}
	emerg := Verdict{BlockUp: true, Emergency: true, Reasons: []string{"host cpu 0.95 > host_cpu_emergency 0.88"}}
	dec := func(a Action, c, want int) Decision {
		return Decision{Action: a, Current: c, Desired: want, Rationale: "x"}
	}
	tests := []struct {
		name        string
		d           Decision
		v           Verdict
		victim, due bool
		action      Action
		desired     int
		outcome     GuardOutcome
	}{
		{"no verdict", dec(ScaleUp, 2, 4), Verdict{}, false, false, ScaleUp, 4, GuardNone},
		{"scale-up blocked", dec(ScaleUp, 2, 4), block, false, false, Stable, 2, GuardBlocked},
		{"scale-up to min_workers allowed", dec(ScaleUp, 0, 3), block, false, false, ScaleUp, 1, GuardBlocked},
		{"scale-up exactly to min_workers untouched", dec(ScaleUp, 0, 1), block, false, false, ScaleUp, 1, GuardNone},
		{"scale-down passes a block", dec(ScaleDown, 4, 2), block, false, false, ScaleDown, 2, GuardNone},
		{"emergency: victim and due loses one", dec(ScaleUp, 4, 6), emerg, true, true, ScaleDown, 3, GuardForced},
		{"emergency: a pool scaling down goes its own way", dec(ScaleDown, 4, 1), emerg, true, true, ScaleDown, 1, GuardNone},
		{"emergency: even on a hold", dec(Hold, 4, 4), emerg, true, true, ScaleDown, 3, GuardForced},
		{"emergency: not the victim is only blocked", dec(ScaleUp, 4, 6), emerg, false, true, Stable, 4, GuardBlocked},
		{"emergency: in cooldown is only blocked", dec(ScaleUp, 4, 6), emerg, true, false, Stable, 4, GuardBlocked},
		{"emergency: never below min_workers", dec(Stable, 1, 1), emerg, true, true, Stable, 1, GuardNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, outcome := ApplyGuard(tt.d, p, tt.v, tt.victim, tt.due)
			if got.Action != tt.action || got.Desired != tt.desired || outcome != tt.outcome {
				t.Errorf("ApplyGuard = %s %d (%q), want %s %d (%q); %s", got.Action, got.Desired, outcome, tt.action, tt.desired, tt.outcome, got.Rationale)
			}
			if outcome != GuardNone && !strings.Contains(got.Rationale, "host") {
				t.Errorf("rationale %q does not name the host guard", got.Rationale)
			}
		})
	}
}
