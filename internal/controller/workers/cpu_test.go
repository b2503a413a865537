package workers

import (
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestCPUWindow(t *testing.T) {
	for _, c := range []struct {
		name      string
		poll      time.Duration
		targetCPU float64
		policy    string
		want      time.Duration
	}{
		{"scales on CPU: every tick", 5 * time.Second, 0.7, config.PolicyHPA, 2500 * time.Millisecond},
		{"rules may use worker_cpu: every tick", 5 * time.Second, 0, config.PolicyRules, 2500 * time.Millisecond},
		{"no CPU in the policy: half a minute", 5 * time.Second, 0, config.PolicyHPA, idleCPUWindow},
		{"a slow poll is slower still", 2 * time.Minute, 0, config.PolicyHPA, time.Minute},
	} {
		cfg := &config.Pool{PollInterval: c.poll, TargetCPUUtilisation: c.targetCPU}
		cfg.Scaling.Policy = c.policy
		if got := cpuWindow(cfg); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
