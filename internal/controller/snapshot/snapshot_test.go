package snapshot

import (
	"errors"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
	"github.com/flexiq/flexiq-scaled/internal/policy"
	"github.com/flexiq/flexiq-scaled/internal/source"
)

var t0 = time.Date(2026, 12, 1, 15, 0, 0, 0, time.UTC)

// Readers see what was stored, never the owner's next state, and the
// explain ring keeps the last historyLen decisions.
func TestBoardPublishesOnStore(t *testing.T) {
	b := New(Status{Name: "work", Max: 10}, time.Second)
	f := Facts{Pool: "work", Wall: t0, Mode: "active", Current: 2, Workers: api.WorkerCounts{Live: 2, Max: 10}, WorkerList: []api.WorkerView{}}
	if !b.Publish(f, &source.Counts{Pending: 5}, nil, nil, &api.Explanation{}) {
		t.Fatal("a first count is a change")
	}
	if st := b.Status(); st.Current != 0 || st.PendingKnown {
		t.Fatalf("status %+v before Store: readers see the owner's next state", st)
	}
	b.Store()
	if st := b.Status(); st.Current != 2 || st.Pending != 5 || !st.PendingKnown {
		t.Fatalf("status %+v after Store", st)
	}
	if b.Publish(f, &source.Counts{Pending: 5}, nil, nil, nil) {
		t.Error("the same summary again is no change")
	}
	for range historyLen + 5 {
		b.Publish(f, nil, errors.New("down\nmore"), nil, &api.Explanation{})
	}
	b.Store()
	if n := len(b.Explain(0)); n != historyLen {
		t.Errorf("%d decisions kept, want %d", n, historyLen)
	}
	if n := len(b.Explain(3)); n != 3 {
		t.Errorf("Explain(3) gave %d", n)
	}
	if st := b.Status(); st.SourceError != "down" || st.PendingKnown {
		t.Errorf("status %+v: want the error's first line", st)
	}
}

// The view is a copy whose uptimes are brought to now, and the mode
// follows the override, also in a dry-run pool.
func TestView(t *testing.T) {
	up := 10.0
	cases := []struct {
		name     string
		mode     string
		o        api.Override
		wantMode string
	}{
		{"active", "active", api.Override{}, "active"},
		{"dry-run", "dry-run", api.Override{}, "dry-run"},
		{"paused in dry-run", "dry-run, paused", api.Override{Kind: api.OverridePaused}, "paused"},
	}
	for _, tc := range cases {
		b := New(Status{Name: "work"}, time.Second)
		f := Facts{Pool: "work", Wall: t0, Mode: tc.mode, Override: tc.o, WorkerList: []api.WorkerView{{Unit: "w@1", State: "active", UptimeSec: &up}}}
		b.Publish(f, nil, nil, nil, nil)
		b.Store()
		v := b.View(t0.Add(5*time.Second), nil)
		if v.Mode != tc.wantMode || (tc.o.Kind != "") != (v.Override != nil) {
			t.Errorf("%s: mode %q override %v, want %q", tc.name, v.Mode, v.Override, tc.wantMode)
		}
		if got := *v.WorkerList[0].UptimeSec; got != 15 {
			t.Errorf("%s: uptime %v, want 15", tc.name, got)
		}
		v.WorkerList[0].Unit = "changed"
		if b.View(t0, nil).WorkerList[0].Unit != "w@1" {
			t.Errorf("%s: a reader's copy wrote into the snapshot", tc.name)
		}
		if r := TickReport(f, policy.Decision{}, 0, Observation{}); r.Mode != tc.wantMode {
			t.Errorf("%s: tick report's mode %q, want %q", tc.name, r.Mode, tc.wantMode)
		}
	}
}
