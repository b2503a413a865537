package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/api"
)

// status shows a pool's wake address and what it holds (issue 29); a pool
// without one shows no Wake line.
func TestStatusShowsWake(t *testing.T) {
	for _, tc := range []struct {
		name string
		wake *api.WakeView
		want string
	}{
		{"none", nil, ""},
		{"idle", &api.WakeView{Address: "127.0.0.1:18080", Mode: "hold"}, "      Wake: 127.0.0.1:18080 (hold): 0 held, 0 forwarding; 0 wake requests\n"},
		{"holding", &api.WakeView{Address: "127.0.0.1:18080", Mode: "reject", Requests: 2, Holding: true,
			WakeStats: api.WakeStats{Held: 3, Forwarding: 1, Accepted: 5, Forwarded: 1, Rejected: 1}},
			"      Wake: 127.0.0.1:18080 (reject): 3 held, 1 forwarding; 2 wake requests; holding the pool at 1 at least; since the wake process started: 5 accepted, 1 forwarded, 1 answered 503\n"},
	} {
		var b bytes.Buffer
		printPool(&b, api.View{Pool: "web", Mode: "active", Wake: tc.wake}, time.Now())
		got := ""
		for _, l := range strings.SplitAfter(b.String(), "\n") {
			if strings.HasPrefix(l, "      Wake:") {
				got = l
			}
		}
		if got != tc.want {
			t.Errorf("%s: Wake line %q, want %q\n%s", tc.name, got, tc.want, b.String())
		}
	}
}
