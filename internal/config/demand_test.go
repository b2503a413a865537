package config

import (
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/policy"
)

// Every bad demand setting is one problem naming the file, the key and what
// is wrong with it.
func TestDemandValidation(t *testing.T) {
	tests := []struct {
		name string
		text string
		key  string
		msg  string
	}{
		{"unknown mode", pool(`demand = "little"`), "pools.email.demand", `unknown mode "little" (want "none" or "littles-law")`},
		{"not a string", pool(`demand = 1`), "pools.email.demand", "a string"},
		{"window too short", pool("demand = \"littles-law\"\ndemand_window_sec = 0.5"), "pools.email.demand_window_sec", "must be >= 1"},
		{"negative window", pool("demand = \"littles-law\"\ndemand_window_sec = -3"), "pools.email.demand_window_sec", "must be >= 1"},
		{"window without mode", pool("demand_window_sec = 60"), "pools.email.demand_window_sec", `no effect without demand = "littles-law"`},
		{"source that cannot tell", "[pools.email]\napp = \"x\"\ndemand = \"littles-law\"\n[pools.email.source]\ntype = \"sqlite-query\"\npath = \"/x.db\"\nquery = \"SELECT count(*), 0 FROM jobs\"\n",
			"pools.email.demand", `needs a source that reads arrivals and service times: type "flexiq-sqlite", not "sqlite-query"`},
		{"window not a number", pool("demand = \"littles-law\"\ndemand_window_sec = \"1m\""), "pools.email.demand_window_sec", "a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOnlyProblem(t, tt.text, tt.key, tt.msg)
		})
	}
}

func TestDemandParams(t *testing.T) {
	tests := []struct {
		name   string
		extra  string
		mode   string
		window time.Duration
	}{
		{"left out: today's policy", "", policy.DemandNone, 0},
		{"none written", `demand = "none"`, policy.DemandNone, 0},
		{"littles-law, default window", `demand = "littles-law"`, policy.DemandLittlesLaw, policy.DefaultDemandWindow},
		{"littles-law, 30 s", "demand = \"littles-law\"\ndemand_window_sec = 30", policy.DemandLittlesLaw, 30 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := load(t, pool(tt.extra))
			if err != nil {
				t.Fatal(err)
			}
			p := c.Pools["email"].PolicyParams()
			if p.Demand != tt.mode || p.DemandWindow != tt.window {
				t.Errorf("Demand, DemandWindow = %q, %v; want %q, %v", p.Demand, p.DemandWindow, tt.mode, tt.window)
			}
		})
	}
}
