package main

import (
	"strings"
	"testing"
	"time"
)

// The embedded window is what the README and the demo's header describe.
func TestEmbeddedWindow(t *testing.T) {
	tr, err := loadWindow()
	if err != nil {
		t.Fatal(err)
	}
	if len(tr) != 2160 {
		t.Errorf("window has %d jobs; the README says 2,160", len(tr))
	}
	first, last := tr[0].At, tr[len(tr)-1].At
	lo := time.Date(2023, 11, 16, 18, 25, 30, 0, time.UTC)
	hi := time.Date(2023, 11, 16, 18, 35, 30, 0, time.UTC)
	if first.Before(lo) || !last.Before(hi) {
		t.Errorf("window spans %s..%s; the README says %s..%s", first, last, lo, hi)
	}
}

func TestReplayMapping(t *testing.T) {
	tr, err := parseTrace(strings.NewReader("GeneratedTokens,TIMESTAMP,ContextTokens\n" +
		"100,2023-11-16 18:00:20.5000000,7\n" +
		"10,2023-11-16 18:00:00.0000000,3\n"))
	if err != nil {
		t.Fatal(err)
	}
	if tr[0].Generated != 10 || tr[1].Generated != 100 {
		t.Fatalf("not sorted by arrival: %+v", tr)
	}
	r := replay{Speedup: 10, BaseMs: 500, PerTokenMs: 10, LeadIn: 3 * time.Second}
	if got := r.Offset(tr, tr[0]); got != 3*time.Second {
		t.Errorf("first arrival at %s; want the lead-in, 3s", got)
	}
	if got := r.Offset(tr, tr[1]); got != 5050*time.Millisecond {
		t.Errorf("second arrival at %s; want 3s + 20.5s/10 = 5.05s", got)
	}
	if got := r.ServiceMs(tr[1]); got != 150 {
		t.Errorf("service time %d ms; want (500 + 10*100)/10 = 150", got)
	}
	if got := r.TraceTime(tr, 3*time.Second); !got.Equal(tr[0].At) {
		t.Errorf("trace time at the lead-in's end = %s; want the first arrival %s", got, tr[0].At)
	}
}

func TestParseTraceRejects(t *testing.T) {
	for _, in := range []string{
		"",
		"TIMESTAMP,ContextTokens\n2023-11-16 18:00:00,1\n",
		"TIMESTAMP,ContextTokens,GeneratedTokens\n",
		"TIMESTAMP,ContextTokens,GeneratedTokens\nyesterday,1,2\n",
		"TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00,1,-2\n",
	} {
		if _, err := parseTrace(strings.NewReader(in)); err == nil {
			t.Errorf("parseTrace(%q) accepted", in)
		}
	}
}
