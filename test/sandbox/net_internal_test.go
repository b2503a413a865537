package sandbox

import (
	"net/netip"
	"testing"
)

func TestParseOwner(t *testing.T) {
	for _, tc := range []struct {
		alias string
		pid   int
		start uint64
		ok    bool
	}{
		{"flexiq-sandbox owner=123:456", 123, 456, true},
		{"flexiq-sandbox owner=123", 0, 0, false},
		{"flexiq-sandbox owner=x:456", 0, 0, false},
		{"flexiq-sandbox owner=0:456", 0, 0, false},
		{"docker bridge", 0, 0, false},
		{"", 0, 0, false},
	} {
		pid, start, ok := parseOwner(tc.alias)
		if ok != tc.ok || (ok && (pid != tc.pid || start != tc.start)) {
			t.Errorf("parseOwner(%q) = %d, %d, %v; want %d, %d, %v", tc.alias, pid, start, ok, tc.pid, tc.start, tc.ok)
		}
	}
}

// Addresses come in order from the first host address, and the broadcast
// address is never handed out.
func TestNetTake(t *testing.T) {
	for _, tc := range []struct {
		cidr string
		want []string
	}{
		{"10.77.0.0/29", []string{"10.77.0.1/29", "10.77.0.2/29", "10.77.0.3/29", "10.77.0.4/29", "10.77.0.5/29", "10.77.0.6/29"}},
		{"10.77.0.8/30", []string{"10.77.0.9/30", "10.77.0.10/30"}},
	} {
		p := netip.MustParsePrefix(tc.cidr)
		n := &Net{Prefix: p, last: p.Addr()}
		for _, w := range tc.want {
			got, err := n.take()
			if err != nil || got.String() != w {
				t.Fatalf("%s: take = %v, %v; want %s", tc.cidr, got, err, w)
			}
		}
		if got, err := n.take(); err == nil {
			t.Errorf("%s: take after the last address = %v, want an error", tc.cidr, got)
		}
	}
}
