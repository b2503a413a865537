package capacity

import (
	"strings"
	"sync"
	"testing"
)

const (
	mib = 1 << 20
	gib = 1 << 30
)

func TestFit(t *testing.T) {
	host := Host{Cores: 8, Memory: 16 * gib}
	cases := []struct {
		name   string
		budget Budget
		cost   Cost
		want   int
	}{
		{"cores bind", NewBudget(host, 0, 0, 0), Cost{Cores: 1.5, Memory: gib}, 5},
		{"memory binds", NewBudget(host, 0, 0, 0), Cost{Cores: 0.5, Memory: 3 * gib}, 5},
		{"cores floored, not rounded", NewBudget(host, 0, 0, 0), Cost{Cores: 3}, 2},
		{"memory floored", NewBudget(host, 0, 0, 0), Cost{Memory: 5 * gib}, 3},
		{"reserves come off first", NewBudget(host, 2, 4*gib, 0), Cost{Cores: 1, Memory: gib}, 6},
		{"a reserve of cores leaves exact room", NewBudget(Host{Cores: 4.3, Memory: gib}, 0.3, 0, 0), Cost{Cores: 1}, 4},
		{"the count cap binds", NewBudget(host, 0, 0, 3), Cost{Cores: 1}, 3},
		{"unlimited workers: the count cap alone", NewBudget(host, 0, 0, 12), Cost{}, 12},
		{"unlimited workers, no cap", NewBudget(host, 0, 0, 0), Cost{}, Unlimited},
		{"reserve above the host leaves nothing", NewBudget(host, 10, 32*gib, 0), Cost{Cores: 0.1}, 0},
		{"memory reserve above the host", NewBudget(host, 0, 32*gib, 0), Cost{Memory: mib}, 0},
		{"one worker bigger than the host", NewBudget(host, 0, 0, 0), Cost{Cores: 16}, 0},
		{"groups of 3: cores", NewBudget(host, 0, 0, 0), Cost{Cores: 1}.Group(3), 2},
		{"groups of 3: memory", NewBudget(host, 0, 0, 0), Cost{Memory: 2 * gib}.Group(3), 2},
		{"groups of 3: the count cap counts ranks", NewBudget(host, 0, 0, 7), Cost{}.Group(3), 2},
		{"a group larger than the count cap", NewBudget(host, 0, 0, 2), Cost{}.Group(3), 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Fit(tc.budget, tc.cost); got != tc.want {
				t.Errorf("Fit(%+v, %+v) = %d, want %d", tc.budget, tc.cost, got, tc.want)
			}
		})
	}
}

func TestShortfall(t *testing.T) {
	b := NewBudget(Host{Cores: 4, Memory: 8 * gib}, 1, 2*gib, 0)
	cases := []struct {
		name string
		b    Budget
		cost Cost
		n    int
		want []string // substrings; none = fits
	}{
		{"fits", b, Cost{Cores: 1, Memory: gib}, 3, nil},
		{"cores short", b, Cost{Cores: 1}, 5, []string{"2 cores (need 5, have 3)"}},
		{"memory short", b, Cost{Memory: 4 * gib}, 2, []string{"2 GiB of memory (need 8 GiB, have 6 GiB)"}},
		{"both short", b, Cost{Cores: 2, Memory: 4 * gib}, 2, []string{"1 cores", " and ", "2 GiB of memory"}},
		{"count short", Budget{Cores: 100, Memory: 100 * gib, Workers: 4}, Cost{}, 6, []string{"2 workers (max_total_workers = 4)"}},
		{"no wrap-around", b, Cost{Memory: 1 << 62}, 8, []string{"more than 16 EiB"}},
		{"groups: ranks' cores", b, Cost{Cores: 1}.Group(2), 2, []string{"1 cores (need 4, have 3)"}},
		{"groups: ranks count", Budget{Cores: 100, Memory: 100 * gib, Workers: 4}, Cost{}.Group(3), 2,
			[]string{"2 workers (max_total_workers = 4; a group is 3)"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Shortfall(tc.b, tc.cost, tc.n)
			if len(tc.want) == 0 && got != "" {
				t.Fatalf("Shortfall = %q, want none", got)
			}
			if len(tc.want) > 0 && got == "" {
				t.Fatalf("Shortfall = none, want %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("Shortfall = %q, want it to contain %q", got, w)
				}
			}
		})
	}
}

func TestLedger(t *testing.T) {
	type claim struct {
		pool    string
		cost    Cost
		n       int
		granted int
		why     string // substring, when fewer are granted
	}
	big, small := Cost{Cores: 1, Memory: 2 * gib}, Cost{Cores: 0.5, Memory: 512 * mib}
	cases := []struct {
		name   string
		budget Budget
		set    map[string]int // units already there, of cost big
		claims []claim
	}{
		{"room for all", Budget{Cores: 4, Memory: 8 * gib}, nil, []claim{
			{"a", big, 2, 2, ""}, {"b", big, 2, 2, ""}, {"a", big, 1, 0, "cores"},
		}},
		{"a partial grant", Budget{Cores: 4, Memory: 8 * gib}, map[string]int{"a": 3}, []claim{
			{"b", big, 3, 1, "cores"},
		}},
		{"pools share the memory", Budget{Cores: 64, Memory: 8 * gib}, map[string]int{"a": 3}, []claim{
			{"b", small, 5, 4, "memory"},
		}},
		{"max_total_workers across pools", Budget{Cores: 64, Memory: 64 * gib, Workers: 5}, map[string]int{"a": 3}, []claim{
			{"b", Cost{}, 3, 2, ""}, {"c", small, 1, 0, "max_total_workers = 5 reached"},
		}},
		{"unlimited pools only count", Budget{Cores: 1, Memory: gib}, map[string]int{"a": 1}, []claim{
			{"b", Cost{}, 100, 100, ""},
		}},
		{"a group costs its ranks", Budget{Cores: 8, Memory: 64 * gib}, map[string]int{"a": 2}, []claim{
			{"g", Cost{Cores: 1}.Group(3), 3, 2, "cores"}, {"g", Cost{Cores: 1}.Group(3), 1, 0, "cores"},
		}},
		{"groups' ranks count against max_total_workers", Budget{Cores: 64, Memory: 64 * gib, Workers: 8}, map[string]int{"a": 1}, []claim{
			{"g", Cost{}.Group(3), 3, 2, ""}, {"h", Cost{}, 2, 1, "1 workers"}, {"h", Cost{}, 1, 0, "max_total_workers = 8 reached"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLedger(tc.budget)
			for pool, n := range tc.set {
				l.Set(pool, big, n)
			}
			for i, c := range tc.claims {
				got, why := l.Claim(c.pool, c.cost, c.n)
				if got != c.granted {
					t.Fatalf("claim %d (%s %d): granted %d, want %d (%s)", i, c.pool, c.n, got, c.granted, why)
				}
				if got < c.n && (why == "" || !strings.Contains(why, c.why)) {
					t.Errorf("claim %d: why = %q, want it to contain %q", i, why, c.why)
				}
			}
		})
	}
}

func TestLedgerSetReplacesClaims(t *testing.T) {
	l := NewLedger(Budget{Cores: 2, Memory: gib})
	c := Cost{Cores: 1}
	if n, _ := l.Claim("a", c, 2); n != 2 {
		t.Fatalf("granted %d, want 2", n)
	}
	// One of the two failed to start: the next listing says 1.
	l.Set("a", c, 1)
	if n, _ := l.Claim("b", c, 2); n != 1 {
		t.Fatalf("granted %d, want 1", n)
	}
	l.Forget("a")
	if n, _ := l.Claim("b", c, 2); n != 1 {
		t.Fatalf("after Forget: granted %d, want 1", n)
	}
}

func TestCostGroup(t *testing.T) {
	cases := []struct {
		name string
		c    Cost
		n    int
		want Cost
	}{
		{"one is the cost itself", Cost{Cores: 1.5, Memory: gib}, 1, Cost{Cores: 1.5, Memory: gib}},
		{"three ranks", Cost{Cores: 0.5, Memory: gib}, 3, Cost{Cores: 1.5, Memory: 3 * gib, Units: 3}},
		{"unlimited ranks still count", Cost{}, 4, Cost{Units: 4}},
		{"memory saturates", Cost{Memory: 1 << 63}, 4, Cost{Memory: ^uint64(0), Units: 4}},
	}
	for _, tc := range cases {
		if got := tc.c.Group(tc.n); got != tc.want {
			t.Errorf("%s: %+v.Group(%d) = %+v, want %+v", tc.name, tc.c, tc.n, got, tc.want)
		}
	}
}

func TestNilLedgerGrantsAll(t *testing.T) {
	var l *Ledger
	l.Set("a", Cost{Cores: 1}, 3)
	if n, why := l.Claim("a", Cost{Cores: 1}, 7); n != 7 || why != "" {
		t.Errorf("nil ledger: %d, %q", n, why)
	}
}

// Pools tick in goroutines of their own: claims never overbook.
func TestLedgerConcurrentClaims(t *testing.T) {
	l := NewLedger(Budget{Cores: 10, Memory: 100 * gib})
	var wg sync.WaitGroup
	total := make([]int, 8)
	for i := range total {
		wg.Go(func() {
			for range 10 {
				n, _ := l.Claim(string(rune('a'+i)), Cost{Cores: 1}, 1)
				total[i] += n
			}
		})
	}
	wg.Wait()
	sum := 0
	for _, n := range total {
		sum += n
	}
	if sum != 10 {
		t.Errorf("granted %d in all, want 10", sum)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{512: "512 B", 1536: "1.5 KiB", 2 * gib: "2 GiB", 3*gib + 300*mib: "3.3 GiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestReadHost(t *testing.T) {
	h, err := ReadHost()
	if err != nil {
		t.Fatal(err)
	}
	if h.Cores < 1 || h.Memory < 64*mib {
		t.Errorf("ReadHost = %+v: implausible", h)
	}
}
