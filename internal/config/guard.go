package config

import (
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// The [host_guard] table: the daemon-wide guard on host CPU, pressure and
// memory (policy.Judge). Without the table there is no guard, and every pool
// scales as it did before the guard existed.

type rawHostGuard struct {
	HostCPUScaleUpMax     value `toml:"host_cpu_scale_up_max"`
	HostCPUEmergency      value `toml:"host_cpu_emergency"`
	AlphaUp               value `toml:"alpha_up"`
	AlphaDown             value `toml:"alpha_down"`
	EmergencyCooldownSec  value `toml:"emergency_cooldown_sec"`
	PSICPUMax             value `toml:"psi_cpu_max"`
	PSIMemoryMax          value `toml:"psi_memory_max"`
	PSICPUEmergency       value `toml:"psi_cpu_emergency"`
	PSIMemoryEmergency    value `toml:"psi_memory_emergency"`
	MemAvailableMin       value `toml:"mem_available_min"`
	MemAvailableEmergency value `toml:"mem_available_emergency"`
	SampleIntervalSec     value `toml:"sample_interval_sec"`
}

func (r rawHostGuard) set() bool {
	return r != rawHostGuard{}
}

// HostGuard is the validated [host_guard] table.
type HostGuard struct {
	policy.GuardParams
	// SampleInterval is how often the host is read: once per interval for
	// all pools, whichever pool's tick asks. Default: daemon.poll_interval_sec.
	SampleInterval time.Duration
}

func init() {
	// Config diffs name these fields by their keys.
	keyNames["Scaling.Priority"] = "priority"
	keyNames["Pool.Scaling"] = flattened
}

// hostGuard builds [host_guard]; nil when the table is absent.
func (l *loader) hostGuard(r rawHostGuard, poll time.Duration) *HostGuard {
	if !r.set() {
		return nil
	}
	key := func(k string) string { return "host_guard." + k }
	g := &HostGuard{GuardParams: policy.DefaultGuardParams(), SampleInterval: poll}
	fraction := func(k string, v value, dst *float64) {
		if l.number(key(k), v, dst) && !(*dst > 0 && *dst <= 1) {
			l.add(key(k), "must be in (0, 1]")
		}
	}
	fraction("host_cpu_scale_up_max", r.HostCPUScaleUpMax, &g.CPUScaleUpMax)
	fraction("host_cpu_emergency", r.HostCPUEmergency, &g.CPUEmergency)
	if g.CPUEmergency < g.CPUScaleUpMax {
		l.add(key("host_cpu_emergency"), "must be >= host_cpu_scale_up_max (%g): an emergency that allows a scale-up would undo itself", g.CPUScaleUpMax)
	}
	fraction("alpha_up", r.AlphaUp, &g.AlphaUp) // weights, not shares of the host
	fraction("alpha_down", r.AlphaDown, &g.AlphaDown)
	if l.seconds(key("emergency_cooldown_sec"), r.EmergencyCooldownSec, &g.EmergencyCooldown) && g.EmergencyCooldown < 0 {
		l.add(key("emergency_cooldown_sec"), "must be >= 0")
	}
	if l.seconds(key("sample_interval_sec"), r.SampleIntervalSec, &g.SampleInterval) && g.SampleInterval < minPollInterval {
		l.add(key("sample_interval_sec"), "must be >= 0.1")
	}
	for _, p := range []struct {
		name string
		v    value
		dst  *float64
	}{
		{"psi_cpu_max", r.PSICPUMax, &g.PSICPUMax},
		{"psi_memory_max", r.PSIMemoryMax, &g.PSIMemoryMax},
		{"psi_cpu_emergency", r.PSICPUEmergency, &g.PSICPUEmergency},
		{"psi_memory_emergency", r.PSIMemoryEmergency, &g.PSIMemoryEmergency},
	} {
		if l.number(key(p.name), p.v, p.dst) && !(*p.dst > 0 && *p.dst <= 100) {
			l.add(key(p.name), "must be in (0, 100]: the percentage of time some task stalled (\"some avg10\" in /proc/pressure)")
		}
	}
	for _, m := range []struct {
		name string
		v    value
		dst  *uint64
	}{
		{"mem_available_min", r.MemAvailableMin, &g.MemAvailableMin},
		{"mem_available_emergency", r.MemAvailableEmergency, &g.MemAvailableEmergency},
	} {
		l.byteSize(key(m.name), m.v, m.dst)
	}
	if g.MemAvailableEmergency > 0 && g.MemAvailableMin > 0 && g.MemAvailableEmergency > g.MemAvailableMin {
		l.add(key("mem_available_emergency"), "must be <= mem_available_min: an emergency that allows a scale-up would undo itself")
	}
	for _, pair := range [][2]string{{"psi_cpu_max", "psi_cpu_emergency"}, {"psi_memory_max", "psi_memory_emergency"}} {
		lo, hi := g.PSICPUMax, g.PSICPUEmergency
		if pair[0] == "psi_memory_max" {
			lo, hi = g.PSIMemoryMax, g.PSIMemoryEmergency
		}
		if lo > 0 && hi > 0 && hi < lo {
			l.add(key(pair[1]), "must be >= %s (%g)", pair[0], lo)
		}
	}
	return g
}

// byteSize reads a size as memory_max takes it: an integer byte count, or a
// string with a K, M, G or T suffix (base 1024).
func (r *reader) byteSize(key string, v value, dst *uint64) bool {
	var s string
	switch raw := v.raw.(type) {
	case nil:
		return false
	case int64:
		if raw < 1 {
			r.add(key, "must be a byte count above 0")
			return false
		}
		*dst = uint64(raw)
		return true
	case string:
		s = raw
	default:
		r.wrongType(key, "a string or an integer", v)
		return false
	}
	n, ok := parseSize(s)
	if !ok || s == "infinity" {
		r.add(key, `must be a byte count above 0, optionally with a K, M, G or T suffix (base 1024), such as "512M"`)
		return false
	}
	*dst = n
	return true
}

// effectiveHostGuard is how WriteEffective writes [host_guard].
type effectiveHostGuard struct {
	HostCPUScaleUpMax     float64 `toml:"host_cpu_scale_up_max"`
	HostCPUEmergency      float64 `toml:"host_cpu_emergency"`
	AlphaUp               float64 `toml:"alpha_up"`
	AlphaDown             float64 `toml:"alpha_down"`
	EmergencyCooldownSec  float64 `toml:"emergency_cooldown_sec"`
	SampleIntervalSec     float64 `toml:"sample_interval_sec"`
	PSICPUMax             float64 `toml:"psi_cpu_max,omitzero"`
	PSIMemoryMax          float64 `toml:"psi_memory_max,omitzero"`
	PSICPUEmergency       float64 `toml:"psi_cpu_emergency,omitzero"`
	PSIMemoryEmergency    float64 `toml:"psi_memory_emergency,omitzero"`
	MemAvailableMin       uint64  `toml:"mem_available_min,omitzero"`
	MemAvailableEmergency uint64  `toml:"mem_available_emergency,omitzero"`
}

func (g *HostGuard) effective() *effectiveHostGuard {
	if g == nil {
		return nil
	}
	return &effectiveHostGuard{
		HostCPUScaleUpMax: g.CPUScaleUpMax, HostCPUEmergency: g.CPUEmergency,
		AlphaUp: g.AlphaUp, AlphaDown: g.AlphaDown,
		EmergencyCooldownSec: g.EmergencyCooldown.Seconds(), SampleIntervalSec: g.SampleInterval.Seconds(),
		PSICPUMax: g.PSICPUMax, PSIMemoryMax: g.PSIMemoryMax,
		PSICPUEmergency: g.PSICPUEmergency, PSIMemoryEmergency: g.PSIMemoryEmergency,
		MemAvailableMin: g.MemAvailableMin, MemAvailableEmergency: g.MemAvailableEmergency,
	}
}
