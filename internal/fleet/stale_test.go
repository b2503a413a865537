package fleet

import (
	"testing"
	"time"
)

// The store's clock and the host's are deliberately years apart: the view
// must never compare one with the other.
var (
	storeT0 = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	hostT0  = time.Date(2001, 6, 1, 0, 0, 0, 0, time.UTC)
)

func TestViewTarget(t *testing.T) {
	sec := func(n float64) time.Duration { return time.Duration(n * float64(time.Second)) }
	plan := func(epoch uint64, at time.Duration, shares map[string]int) Plan {
		return Plan{Epoch: epoch, Target: 10, Shares: shares, At: storeT0.Add(at)}
	}
	three := map[string]int{"a": 4, "me": 3, "c": 3}
	params := StaleParams{TTL: sec(15), MinWorkers: 5, Capacity: 10}
	type read struct {
		p        Plan
		storeAt  time.Duration // the store's now, from storeT0
		hostAt   time.Duration // the host's now, from hostT0
		taken    bool
		preEpoch uint64 // NoteEpoch before the read, when > 0
	}
	tests := []struct {
		name      string
		reads     []read
		at        time.Duration // the host's now for Target
		last      int
		reachable bool
		hosts     int
		params    *StaleParams
		want      Apply
	}{
		{name: "no plan, store up: the local share of min_workers", at: 0, last: 1, reachable: true, hosts: 2,
			want: Apply{Target: 3, Phase: PhaseNone}},
		{name: "no plan, store up, already above it: kept", at: 0, last: 6, reachable: true, hosts: 2,
			want: Apply{Target: 6, Phase: PhaseNone}},
		{name: "no plan, store down: what runs", at: 0, last: 1, reachable: false, hosts: 2,
			want: Apply{Target: 1, Phase: PhaseNone}},
		{name: "fresh: the plan's share", reads: []read{{p: plan(2, 0, three), storeAt: sec(1), hostAt: 0, taken: true}},
			at: sec(2), last: 9, reachable: true, want: Apply{Target: 3, Phase: PhaseFresh, Age: sec(3), Epoch: 2}},
		{name: "fresh at exactly the TTL", reads: []read{{p: plan(2, 0, three), storeAt: sec(15), hostAt: 0, taken: true}},
			at: 0, last: 9, reachable: true, want: Apply{Target: 3, Phase: PhaseFresh, Age: sec(15), Epoch: 2}},
		{name: "a fresh plan without this host: keeps what it runs", reads: []read{{p: plan(2, 0, map[string]int{"a": 5}), storeAt: 0, hostAt: 0, taken: true}},
			at: 0, last: 4, reachable: true, want: Apply{Target: 4, Phase: PhaseJoining, Epoch: 2}},
		{name: "stale, store up: holds the last target", reads: []read{{p: plan(2, 0, three), storeAt: sec(16), hostAt: 0, taken: true}},
			at: 0, last: 3, reachable: true, want: Apply{Target: 3, Phase: PhaseHold, Age: sec(16), Epoch: 2}},
		{name: "a stale plan's share never scales a host down", reads: []read{{p: plan(2, 0, three), storeAt: sec(16), hostAt: 0, taken: true}},
			at: 0, last: 9, reachable: true, want: Apply{Target: 9, Phase: PhaseHold, Age: sec(16), Epoch: 2}},
		{name: "nor up", reads: []read{{p: plan(2, 0, three), storeAt: sec(16), hostAt: 0, taken: true}},
			at: 0, last: 1, reachable: false, want: Apply{Target: 1, Phase: PhaseHold, Age: sec(16), Epoch: 2}},
		{name: "stale because the store went silent: ages on the host's clock", reads: []read{{p: plan(2, 0, three), storeAt: sec(2), hostAt: 0, taken: true}},
			at: sec(14), last: 3, reachable: false, want: Apply{Target: 3, Phase: PhaseHold, Age: sec(16), Epoch: 2}},
		{name: "hold up to TTL + 2 TTLs", reads: []read{{p: plan(2, 0, three), storeAt: 0, hostAt: 0, taken: true}},
			at: sec(45), last: 3, reachable: false, want: Apply{Target: 3, Phase: PhaseHold, Age: sec(45), Epoch: 2}},
		{name: "then fallback, store up: raised to the local share", reads: []read{{p: plan(2, 0, three), storeAt: 0, hostAt: 0, taken: true}},
			at: sec(45.001), last: 1, reachable: true, want: Apply{Target: 2, Phase: PhaseFallback, Age: sec(45.001), Epoch: 2}},
		{name: "fallback never scales down", reads: []read{{p: plan(2, 0, three), storeAt: 0, hostAt: 0, taken: true}},
			at: sec(60), last: 7, reachable: true, want: Apply{Target: 7, Phase: PhaseFallback, Age: sec(60), Epoch: 2}},
		{name: "fallback, store down: never grows", reads: []read{{p: plan(2, 0, three), storeAt: 0, hostAt: 0, taken: true}},
			at: sec(60), last: 0, reachable: false, want: Apply{Target: 0, Phase: PhaseFallback, Age: sec(60), Epoch: 2}},
		{name: "a custom hold", params: &StaleParams{TTL: sec(10), Hold: sec(5), MinWorkers: 3}, reads: []read{{p: plan(2, 0, three), storeAt: 0, hostAt: 0, taken: true}},
			at: sec(15.5), last: 0, reachable: true, want: Apply{Target: 1, Phase: PhaseFallback, Age: sec(15.5), Epoch: 2}},
		{name: "an older epoch is ignored", reads: []read{
			{p: plan(3, 0, three), storeAt: sec(20), hostAt: 0, taken: true},
			{p: plan(2, sec(19), map[string]int{"me": 9}), storeAt: sec(20), hostAt: 0, taken: false},
		}, at: 0, last: 3, reachable: true, want: Apply{Target: 3, Phase: PhaseHold, Age: sec(20), Epoch: 3}},
		{name: "an epoch below a lease seen is ignored", reads: []read{
			{p: plan(4, 0, map[string]int{"me": 9}), storeAt: 0, hostAt: 0, taken: false, preEpoch: 5},
		}, at: 0, last: 1, reachable: true, hosts: 5, want: Apply{Target: 1, Phase: PhaseNone}},
		{name: "the same epoch written earlier is ignored", reads: []read{
			{p: plan(3, sec(10), three), storeAt: sec(10), hostAt: 0, taken: true},
			{p: plan(3, sec(5), map[string]int{"me": 9}), storeAt: sec(10), hostAt: 0, taken: false},
		}, at: 0, last: 3, reachable: true, want: Apply{Target: 3, Phase: PhaseFresh, Epoch: 3}},
		{name: "a new plan makes the view fresh again", reads: []read{
			{p: plan(3, 0, three), storeAt: sec(40), hostAt: 0, taken: true},
			{p: plan(4, sec(41), map[string]int{"me": 6}), storeAt: sec(42), hostAt: sec(2), taken: true},
		}, at: sec(2), last: 3, reachable: true, want: Apply{Target: 6, Phase: PhaseFresh, Age: sec(1), Epoch: 4}},
		{name: "a plan from the store's near future (within FutureSlack) has age 0", reads: []read{{p: plan(2, sec(0.5), three), storeAt: 0, hostAt: 0, taken: true}},
			at: 0, last: 0, reachable: true, want: Apply{Target: 3, Phase: PhaseFresh, Epoch: 2}},
		// Issue 27: a plan dated an hour ahead would hide every real plan
		// of its epoch for the whole term.
		{name: "a plan dated after the store's clock is ignored", reads: []read{
			{p: plan(2, 0, three), storeAt: sec(1), hostAt: 0, taken: true},
			{p: plan(2, sec(3600), map[string]int{"me": 0}), storeAt: sec(2), hostAt: sec(1), taken: false},
			{p: plan(2, sec(2), three), storeAt: sec(3), hostAt: sec(2), taken: true},
		}, at: sec(2), last: 3, reachable: true, want: Apply{Target: 3, Phase: PhaseFresh, Epoch: 2, Age: sec(1)}},
		{name: "the store's clock steps an hour back: the plans after it are taken", reads: []read{
			{p: plan(2, 0, three), storeAt: sec(1), hostAt: 0, taken: true},
			{p: plan(2, sec(-3600), map[string]int{"me": 5}), storeAt: sec(-3599), hostAt: sec(1), taken: true},
		}, at: sec(1), last: 3, reachable: true, want: Apply{Target: 5, Phase: PhaseFresh, Epoch: 2, Age: sec(1)}},
		{name: "a garbage epoch is ignored and not remembered", reads: []read{
			{p: plan(2, 0, three), storeAt: sec(1), hostAt: 0, taken: true},
			{p: plan(1<<63-1, sec(1), map[string]int{"me": 0}), storeAt: sec(1), hostAt: 0, taken: false, preEpoch: 1<<63 - 1},
			{p: plan(2, sec(2), map[string]int{"me": 4}), storeAt: sec(2), hostAt: sec(1), taken: true},
		}, at: sec(1), last: 3, reachable: true, want: Apply{Target: 4, Phase: PhaseFresh, Epoch: 2}},
		{name: "a share above this host's capacity is capped", reads: []read{{p: plan(2, 0, map[string]int{"me": 1000}), storeAt: 0, hostAt: 0, taken: true}},
			at: 0, last: 0, reachable: true, want: Apply{Target: 10, Phase: PhaseFresh, Epoch: 2}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := View{ID: "me"}
			for i, r := range tt.reads {
				if r.preEpoch > 0 {
					v.NoteEpoch(r.preEpoch)
				}
				if got, why := v.Observe(r.p, storeT0.Add(r.storeAt), hostT0.Add(r.hostAt)); got != r.taken {
					t.Fatalf("read %d: taken %t (%s), want %t", i, got, why, r.taken)
				}
			}
			p := params
			if tt.params != nil {
				p = *tt.params
			}
			got := v.Target(hostT0.Add(tt.at), p, tt.last, tt.reachable, tt.hosts)
			got.Why = ""
			if got != tt.want {
				t.Errorf("Target = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestLocalMin(t *testing.T) {
	tests := []struct{ min, hosts, capacity, want int }{
		{5, 3, 0, 2},
		{6, 3, 0, 2},
		{1, 3, 0, 1},
		{0, 3, 0, 0},
		{5, 0, 0, 5},
		{9, 1, 4, 4},
		{-2, 2, 0, 0},
	}
	for _, tt := range tests {
		if got := LocalMin(tt.min, tt.hosts, tt.capacity); got != tt.want {
			t.Errorf("LocalMin(%d, %d, %d) = %d, want %d", tt.min, tt.hosts, tt.capacity, got, tt.want)
		}
	}
}

// The highest epoch seen falls to a lower lease's only once the store has
// shown lower leases for a whole TTL (issue 27: a store that lost its
// data); a higher or garbage lease in between ends or skips the run.
func TestViewNoteLease(t *testing.T) {
	const ttl = 15 * time.Second
	at := func(s int) time.Time { return hostT0.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name   string
		leases []uint64 // one every 5 s from 0
		want   uint64
	}{
		{"rises at once", []uint64{7, 9}, 9},
		{"a lower lease for less than a TTL", []uint64{40, 1, 1, 1}, 40},
		{"a lower lease for a TTL", []uint64{40, 1, 1, 2, 2}, 2},
		{"a higher lease ends the run", []uint64{40, 1, 1, 40, 1, 1}, 40},
		{"garbage and none neither count nor end the run", []uint64{40, 1, 0, 1 << 60, 1, 2}, 2},
		{"garbage never becomes the highest", []uint64{7, 1<<63 - 1}, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var v View
			for i, e := range tt.leases {
				v.NoteLease(e, at(5*i), ttl)
			}
			if v.Highest() != tt.want {
				t.Errorf("highest %d, want %d", v.Highest(), tt.want)
			}
		})
	}
}
