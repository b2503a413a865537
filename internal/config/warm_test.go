package config

import (
	"testing"
	"time"
)

// Every bad onset or keep-warm setting is one problem naming the file, the
// key and what is wrong with it.
func TestWarmValidation(t *testing.T) {
	ll := "demand = \"littles-law\"\n"
	tests := []struct {
		name string
		text string
		key  string
		msg  string
	}{
		{"negative onset", pool(ll + "onset_min_jobs = -1"), "pools.email.onset_min_jobs", "must be >= 0"},
		{"onset of one job", pool(ll + "onset_min_jobs = 1"), "pools.email.onset_min_jobs", "must be >= 2"},
		{"onset without littles-law", pool("onset_min_jobs = 3"), "pools.email.onset_min_jobs", `no effect without demand = "littles-law"`},
		{"onset not a number", pool(ll + `onset_min_jobs = "3"`), "pools.email.onset_min_jobs", "an integer"},
		{"negative floor", pool("keep_warm_workers = -1"), "pools.email.keep_warm_workers", "must be >= 0"},
		{"floor above max", pool("max_workers = 4\nkeep_warm_workers = 5\nkeep_warm_sec = 30"), "pools.email.keep_warm_workers", "must be <= max_workers (4)"},
		{"floor without a time", pool("keep_warm_workers = 3"), "pools.email.keep_warm_workers", "needs keep_warm_sec > 0"},
		{"time without a floor", pool("keep_warm_sec = 30"), "pools.email.keep_warm_sec", "no effect without keep_warm_workers"},
		{"negative time", pool("keep_warm_workers = 3\nkeep_warm_sec = -1"), "pools.email.keep_warm_sec", "must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantOnlyProblem(t, tt.text, tt.key, tt.msg)
		})
	}
}

func TestWarmParams(t *testing.T) {
	c, err := load(t, pool("demand = \"littles-law\"\nonset_min_jobs = 3\nkeep_warm_workers = 3\nkeep_warm_sec = 35"))
	if err != nil {
		t.Fatal(err)
	}
	p := c.Pools["email"].PolicyParams()
	if p.OnsetMinJobs != 3 || p.KeepWarmWorkers != 3 || p.KeepWarm != 35*time.Second {
		t.Errorf("OnsetMinJobs, KeepWarmWorkers, KeepWarm = %d, %d, %v; want 3, 3, 35s", p.OnsetMinJobs, p.KeepWarmWorkers, p.KeepWarm)
	}
	c, err = load(t, pool(""))
	if err != nil {
		t.Fatal(err)
	}
	if p := c.Pools["email"].PolicyParams(); p.OnsetMinJobs != 0 || p.KeepWarmWorkers != 0 || p.KeepWarm != 0 {
		t.Errorf("left out: %d, %d, %v; want all off", p.OnsetMinJobs, p.KeepWarmWorkers, p.KeepWarm)
	}
}
