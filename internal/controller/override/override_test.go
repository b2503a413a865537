package override

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/eventlog"
	"github.com/flexiq/flexiq-scaled/internal/policy"
)

var t0 = time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)

func keeper(t *testing.T) (*Keeper, *int) {
	t.Helper()
	changes := 0
	k := New("work", t.TempDir(), eventlog.NewWriter(&bytes.Buffer{}), func() time.Time { return t0 }, func() { changes++ })
	return k, &changes
}

// The mode as status and the metrics show it, for each override in an
// active and a dry-run pool, with one that has expired.
func TestMode(t *testing.T) {
	cases := []struct {
		name       string
		o          api.Override
		dry        bool
		mode, kind string
	}{
		{"none", api.Override{}, false, "active", "active"},
		{"none, dry-run", api.Override{}, true, "dry-run", "dry-run"},
		{"paused", api.Override{Kind: api.OverridePaused}, false, "paused", "paused"},
		{"pinned, dry-run", api.Override{Kind: api.OverridePinned, Workers: 3}, true, "dry-run, pinned at 3", "pinned"},
		{"expired pin", api.Override{Kind: api.OverridePinned, Workers: 3, Until: t0.Add(-time.Second)}, false, "active", "active"},
	}
	for _, tc := range cases {
		k, _ := keeper(t)
		k.o = tc.o
		if got := k.Mode(t0, tc.dry); got != tc.mode {
			t.Errorf("%s: Mode = %q, want %q", tc.name, got, tc.mode)
		}
		if got := k.Kind(t0, tc.dry); got != tc.kind {
			t.Errorf("%s: Kind = %q, want %q", tc.name, got, tc.kind)
		}
	}
}

// Set refuses a pin outside 0..max_workers, an unknown kind and a past
// deadline, and keeps the override it had; a good one is kept and said.
func TestSet(t *testing.T) {
	cases := []struct {
		name string
		o    api.Override
		ok   bool
	}{
		{"pin above max", api.Override{Kind: api.OverridePinned, Workers: 11}, false},
		{"negative pin", api.Override{Kind: api.OverridePinned, Workers: -1}, false},
		{"unknown kind", api.Override{Kind: "frozen"}, false},
		{"past deadline", api.Override{Kind: api.OverridePaused, Until: t0}, false},
		{"pin at max", api.Override{Kind: api.OverridePinned, Workers: 10}, true},
		{"pause for a minute", api.Override{Kind: api.OverridePaused, Until: t0.Add(time.Minute)}, true},
	}
	for _, tc := range cases {
		k, changes := keeper(t)
		got, err := k.Set(tc.o, 10)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, api.ErrOverride)) {
			t.Errorf("%s: err %v, want ok %v", tc.name, err, tc.ok)
		}
		if !tc.ok && (got != api.Override{} || *changes != 0) {
			t.Errorf("%s: refused, yet got %+v after %d changes", tc.name, got, *changes)
		}
		if tc.ok && (got.Kind != tc.o.Kind || !got.Since.Equal(t0) || *changes != 1 || k.Current() != got) {
			t.Errorf("%s: got %+v after %d changes", tc.name, got, *changes)
		}
	}
}

// A pin above a lowered max_workers holds at max_workers; a pause holds
// the target whatever the policy says.
func TestApply(t *testing.T) {
	cases := []struct {
		name       string
		o          api.Override
		desired    int
		wantAction policy.Action
		want       int
	}{
		{"none", api.Override{}, 7, policy.ScaleUp, 7},
		{"paused", api.Override{Kind: api.OverridePaused}, 7, policy.Hold, 4},
		{"pinned above max", api.Override{Kind: api.OverridePinned, Workers: 12}, 1, policy.ScaleUp, 10},
		{"pinned at current", api.Override{Kind: api.OverridePinned, Workers: 2}, 7, policy.Stable, 2},
	}
	for _, tc := range cases {
		k, _ := keeper(t)
		k.o = tc.o
		d := k.Apply(t0, policy.Decision{Action: policy.ScaleUp, Current: 2, Desired: tc.desired}, &api.Explanation{}, 4, 10)
		if d.Action != tc.wantAction || d.Desired != tc.want {
			t.Errorf("%s: %s -> %d, want %s -> %d", tc.name, d.Action, d.Desired, tc.wantAction, tc.want)
		}
	}
}
