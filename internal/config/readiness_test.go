package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/capacity"
)

func TestReadinessKeys(t *testing.T) {
	cases := []struct {
		name  string
		extra string
		check func(t *testing.T, p *Pool)
		want  []string // problem substrings; none = valid
	}{
		{"requires", `requires = ["postgresql.service", "n8n.service", "srv-shared.mount"]`, func(t *testing.T, p *Pool) {
			if !reflect.DeepEqual(p.Requires, []string{"postgresql.service", "n8n.service", "srv-shared.mount"}) {
				t.Errorf("Requires = %q", p.Requires)
			}
		}, nil},
		{"requires an instance", `requires = ["getty@tty1.service"]`, nil, nil},
		{"requires no suffix", `requires = ["postgresql"]`, nil, []string{`"postgresql" is not a unit name`}},
		{"requires a bare template", `requires = ["getty@.service"]`, nil, []string{"is not a unit name"}},
		{"requires a worker", `requires = ["flexiq-email@1.service"]`, nil, []string{"workers cannot depend on workers"}},
		{"requires twice", `requires = ["a.service", "a.service"]`, nil, []string{"listed twice"}},
		{"requires a string", `requires = "a.service"`, nil, []string{"requires"}},
		{"start_condition as a shell command", `start_condition = "test -s /srv/shared/ready"`, func(t *testing.T, p *Pool) {
			if !reflect.DeepEqual(p.StartCondition, []string{"/bin/sh", "-c", "test -s /srv/shared/ready"}) {
				t.Errorf("StartCondition = %q", p.StartCondition)
			}
		}, nil},
		{"start_condition as a command line", `start_condition = ["/usr/bin/test", "-e", "/srv/x"]`, func(t *testing.T, p *Pool) {
			if len(p.StartCondition) != 3 || p.StartCondition[0] != "/usr/bin/test" {
				t.Errorf("StartCondition = %q", p.StartCondition)
			}
		}, nil},
		{"start_condition relative", `start_condition = ["test", "-e", "/srv/x"]`, nil, []string{"must be an absolute path"}},
		{"start_condition empty", `start_condition = " "`, nil, []string{"must not be empty"}},
		{"start_condition a number", `start_condition = 3`, nil, []string{"a string (a shell command) or an array"}},
		{"two-phase drain", "quiet_signal = \"tstp\"\nquiet_period_sec = 20", func(t *testing.T, p *Pool) {
			if p.QuietSignal != "SIGTSTP" || p.QuietSignalNumber != 20 || p.QuietPeriod != 20*time.Second {
				t.Errorf("quiet = %s/%d/%v", p.QuietSignal, p.QuietSignalNumber, p.QuietPeriod)
			}
		}, nil},
		{"quiet signal without period", `quiet_signal = "TSTP"`, nil, []string{"quiet_period_sec: missing"}},
		{"quiet period without signal", `quiet_period_sec = 5`, nil, []string{"quiet_signal: missing"}},
		{"quiet period zero", "quiet_signal = \"TSTP\"\nquiet_period_sec = 0", nil, []string{"must be > 0"}},
		{"quiet signal unknown", "quiet_signal = \"NOPE\"\nquiet_period_sec = 5", nil, []string{`unknown signal "NOPE"`}},
		{"quiet signal KILL", "quiet_signal = \"KILL\"\nquiet_period_sec = 5", nil, []string{"cannot be caught"}},
		{"quiet signal is the drain signal", "quiet_signal = \"TERM\"\nquiet_period_sec = 5", nil, []string{"also the drain signal"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, pool(tc.extra))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.check != nil {
					tc.check(t, c.Pools["email"])
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %q", tc.want)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("problems %q lack %q", msg, w)
				}
			}
		})
	}
}

func TestCapacityTable(t *testing.T) {
	c, err := load(t, "[capacity]\nmax_total_workers = 12\nreserved_cores = 0.5\nreserved_memory = \"2G\"\n"+pool(""))
	if err != nil {
		t.Fatal(err)
	}
	want := Capacity{MaxTotalWorkers: 12, ReservedCores: 0.5, ReservedMemory: "2G", ReservedMemoryBytes: 2 << 30}
	if c.Capacity != want {
		t.Errorf("Capacity = %+v, want %+v", c.Capacity, want)
	}
	for text, wantErr := range map[string]string{
		"[capacity]\nmax_total_workers = 0\n":          "capacity.max_total_workers: must be >= 1",
		"[capacity]\nreserved_cores = -1\n":            "capacity.reserved_cores: must be >= 0",
		"[capacity]\nreserved_memory = \"infinity\"\n": "capacity.reserved_memory: must be a byte count",
		"[capacity]\nreserved_memroy = \"1G\"\n":       `did you mean "reserved_memory"?`,
	} {
		if _, err := load(t, text+pool("")); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%q: error %v, want %q", text, err, wantErr)
		}
	}
}

func TestCheckCapacity(t *testing.T) {
	host := capacity.Host{Cores: 4, Memory: 8 << 30}
	pools := func(limits ...string) string {
		var b strings.Builder
		for i, l := range limits {
			name := string(rune('a' + i))
			b.WriteString("[pools." + name + "]\nexec = [\"/bin/w\"]\n" + l + "\n[pools." + name + ".source]\npath = \"/q.db\"\n")
		}
		return b.String()
	}
	cases := []struct {
		name     string
		text     string
		problems []string
		capped   map[string]int
	}{
		{"no limits: nothing to judge", pools("min_workers = 3\nmax_workers = 500"), nil, nil},
		{"fits", pools("min_workers = 2\nmax_workers = 4\n[pools.a.limits]\ncpu_quota = \"100%\"\nmemory_max = \"1G\""), nil, nil},
		{"max_workers capped by cores", pools("min_workers = 1\nmax_workers = 10\n[pools.a.limits]\ncpu_quota = \"150%\""), nil, map[string]int{"a": 2}},
		{"max_workers capped by memory", pools("min_workers = 1\nmax_workers = 10\n[pools.a.limits]\nmemory_max = \"3G\""), nil, map[string]int{"a": 2}},
		{"min_workers does not fit: cores", pools("min_workers = 5\nmax_workers = 10\n[pools.a.limits]\ncpu_quota = \"100%\""),
			[]string{"pools.a.min_workers", "5 workers do not fit", "short of 1 cores (need 5, have 4)"}, nil},
		{"min_workers does not fit: memory", pools("min_workers = 3\nmax_workers = 10\n[pools.a.limits]\nmemory_max = \"3G\""),
			[]string{"pools.a.min_workers", "1 GiB of memory (need 9 GiB, have 8 GiB)"}, nil},
		{"reserves count", "[capacity]\nreserved_cores = 1\nreserved_memory = \"4G\"\n" +
			pools("min_workers = 2\nmax_workers = 2\n[pools.a.limits]\nmemory_max = \"3G\""),
			[]string{"short of 2 GiB of memory (need 6 GiB, have 4 GiB)", "after [capacity]: 3 cores, 4 GiB"}, nil},
		{"max_total_workers caps a pool", "[capacity]\nmax_total_workers = 6\n" + pools("min_workers = 1\nmax_workers = 10"), nil, map[string]int{"a": 6}},
		{"the pools' minimums together", "[capacity]\nmax_total_workers = 6\n" + pools("min_workers = 4\nmax_workers = 5", "min_workers = 3\nmax_workers = 5"),
			[]string{"min_workers together do not fit", "1 workers (max_total_workers = 6)"}, nil},
		{"the pools' minimums together: cores", pools("min_workers = 2\nmax_workers = 2\n[pools.a.limits]\ncpu_quota = \"150%\"",
			"min_workers = 1\nmax_workers = 2\n[pools.b.limits]\ncpu_quota = \"150%\""),
			[]string{"together do not fit", "0.5 cores (need 4.5, have 4)"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			problems, capped := CheckCapacity(c, host)
			var msgs []string
			for _, p := range problems {
				msgs = append(msgs, p.String())
			}
			all := strings.Join(msgs, "\n")
			if len(tc.problems) == 0 && all != "" {
				t.Errorf("problems:\n%s", all)
			}
			for _, w := range tc.problems {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q lack %q", all, w)
				}
			}
			got := map[string]int{}
			for _, cp := range capped {
				got[cp.Pool] = cp.To
			}
			if len(got) != len(tc.capped) || (len(got) > 0 && !reflect.DeepEqual(got, tc.capped)) {
				t.Errorf("capped %v, want %v", got, tc.capped)
			}
		})
	}
}

func TestApplyCapacity(t *testing.T) {
	defer func(old func() (capacity.Host, error)) { readHost = old }(readHost)
	readHost = func() (capacity.Host, error) { return capacity.Host{Cores: 2, Memory: 4 << 30}, nil }
	c, err := load(t, pool("max_workers = 8\n[pools.email.limits]\ncpu_quota = \"50%\""))
	if err != nil {
		t.Fatal(err)
	}
	_, warnings := CheckHostCapacity(c)
	found := false
	for _, w := range warnings {
		found = found || strings.Contains(w.String(), "pools.email.max_workers: 8 is above capacity")
	}
	if !found {
		t.Errorf("no capacity warning in %v", warnings)
	}
	capped := ApplyCapacity(c)
	if len(capped) != 1 || c.Pools["email"].MaxWorkers != 4 {
		t.Errorf("capped %+v, max_workers %d, want 4", capped, c.Pools["email"].MaxWorkers)
	}
}

func TestWriteEffectiveReadinessRoundTrip(t *testing.T) {
	c, err := load(t, "[capacity]\nmax_total_workers = 12\nreserved_memory = 1073741824\n"+
		pool("requires = [\"postgresql.service\"]\nstart_condition = \"test -e /srv/ready\"\nquiet_signal = \"TSTP\"\nquiet_period_sec = 2.5"))
	if err != nil {
		t.Fatal(err)
	}
	again, effective := reloadEffective(t, c)
	again.Path = c.Path
	c.Pools["email"].UserExplicit = true
	if !reflect.DeepEqual(again, c) {
		t.Errorf("round trip changed the config:\n%s\n got %+v\nwant %+v", effective, again, c)
	}
}

func TestDiffReadiness(t *testing.T) {
	a, b := &Pool{QuietSignalNumber: 20, QuietPeriod: time.Second}, &Pool{QuietSignalNumber: 10, QuietPeriod: 2 * time.Second, Requires: []string{"x.service"}}
	got := strings.Join(Diff(a, b), ",")
	for _, want := range []string{"quiet_signal", "quiet_period_sec", "requires"} {
		if !strings.Contains(got, want) {
			t.Errorf("Diff = %q, lacks %q", got, want)
		}
	}
}

// TestCheckCapacityGroups: a gang pool's min_workers and max_workers count
// groups, each costing its ranks' limits, and its ranks count against
// max_total_workers.
func TestCheckCapacityGroups(t *testing.T) {
	host := capacity.Host{Cores: 8, Memory: 16 << 30}
	cases := []struct {
		name     string
		text     string
		size     int
		problems []string
		capped   int // 0 = not capped
		why      string
	}{
		{"fits", pool("min_workers = 1\nmax_workers = 2\n[pools.email.limits]\ncpu_quota = \"100%\""), 3, nil, 0, ""},
		{"max_workers capped in groups by cores", pool("min_workers = 1\nmax_workers = 5\n[pools.email.limits]\ncpu_quota = \"100%\""), 3,
			nil, 2, "only 2 groups of 3 fit"},
		{"max_workers capped in groups by memory", pool("min_workers = 1\nmax_workers = 5\n[pools.email.limits]\nmemory_max = \"4G\""), 2,
			nil, 2, "only 2 groups of 2 fit"},
		{"max_total_workers counts ranks", "[capacity]\nmax_total_workers = 7\n" + pool("min_workers = 1\nmax_workers = 5"), 3,
			nil, 2, "only 2 groups of 3 fit"},
		{"min_workers in groups does not fit", pool("min_workers = 3\nmax_workers = 5\n[pools.email.limits]\ncpu_quota = \"100%\""), 3,
			[]string{"3 groups of 3 do not fit", "short of 1 cores (need 9, have 8)"}, 0, ""},
		{"a group larger than max_total_workers", "[capacity]\nmax_total_workers = 2\n" + pool("min_workers = 1\nmax_workers = 1"), 3,
			[]string{"1 groups of 3 do not fit", "a group is 3"}, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			c.Pools["email"].Service = &Service{GroupSize: tc.size}
			problems, capped := CheckCapacity(c, host)
			var msgs []string
			for _, p := range problems {
				msgs = append(msgs, p.String())
			}
			all := strings.Join(msgs, "\n")
			if len(tc.problems) == 0 && all != "" {
				t.Errorf("problems:\n%s", all)
			}
			for _, w := range tc.problems {
				if !strings.Contains(all, w) {
					t.Errorf("problems %q lack %q", all, w)
				}
			}
			switch {
			case tc.capped == 0 && len(capped) > 0:
				t.Errorf("capped %+v, want none", capped)
			case tc.capped > 0 && (len(capped) != 1 || capped[0].To != tc.capped || !strings.Contains(capped[0].Why, tc.why)):
				t.Errorf("capped %+v, want to %d because %q", capped, tc.capped, tc.why)
			}
		})
	}
}
