package redisstore

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

func TestPoolKeys(t *testing.T) {
	k, err := poolKeys("email_2")
	if err != nil {
		t.Fatal(err)
	}
	want := keys{
		lease: "flexiq-scaled:fleet:{email_2}:lease", epoch: "flexiq-scaled:fleet:{email_2}:epoch",
		plan: "flexiq-scaled:fleet:{email_2}:plan", members: "flexiq-scaled:fleet:{email_2}:members",
		seen: "flexiq-scaled:fleet:{email_2}:seen", released: "flexiq-scaled:fleet:{email_2}:released",
	}
	if k != want {
		t.Errorf("keys = %+v, want %+v", k, want)
	}
	for _, bad := range []string{"", "Email", "a}b", "a:b", "a{b", "e-mail", strings.Repeat("a", 33), "é"} {
		if _, err := poolKeys(bad); err == nil || !strings.Contains(err.Error(), "not a pool name") {
			t.Errorf("poolKeys(%q) = %v, want a refusal", bad, err)
		}
	}
}

func TestPlanEncoding(t *testing.T) {
	p := fleet.Plan{Epoch: 99, Target: 7, Shares: map[string]int{"a": 3, "b": 4}, At: time.Unix(1, 0), State: []byte{0, 1, 0xff}}
	body, err := encodePlan(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(body, `{"v":1,`) {
		t.Errorf("plan JSON %s: want the version first", body)
	}
	tests := []struct {
		name, epoch, at, body string
		want                  fleet.Plan
		err                   string
	}{
		{"round trip", "12", "1764669000123", body,
			fleet.Plan{Epoch: 12, Target: 7, Shares: p.Shares, At: time.UnixMilli(1764669000123), State: p.State}, ""},
		{"no state", "1", "5", `{"v":1,"target":0,"shares":{}}`, fleet.Plan{Epoch: 1, Shares: map[string]int{}, At: time.UnixMilli(5)}, ""},
		{"newer version", "3", "5", `{"v":2,"target":1}`, fleet.Plan{}, "encoding version 2"},
		{"not JSON", "3", "5", `{`, fleet.Plan{}, "plan of epoch 3"},
		{"bad epoch", "x", "5", body, fleet.Plan{}, "epoch"},
		{"bad time", "1", "", body, fleet.Plan{}, "time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodePlan(tc.epoch, tc.at, tc.body)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Errorf("decodePlan = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestMemberEncoding(t *testing.T) {
	m := fleet.Member{ID: "abc", Capacity: 8, Live: 3, Starting: 1, Draining: 2, Version: "1.2.3", SeenAt: time.Unix(9, 0)}
	body, err := encodeMember(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeMember("abc", body, 1764669000123)
	want := m
	want.SeenAt = time.UnixMilli(1764669000123) // the server's, never the host's
	if err != nil || got != want {
		t.Errorf("member round trip = %+v, %v; want %+v", got, err, want)
	}
	if _, err := encodeMember(fleet.Member{}); err == nil {
		t.Error("a member without an id was encoded")
	}
	if _, err := decodeMember("x", `{"v":2}`, 1); err == nil || !strings.Contains(err.Error(), "encoding version 2") {
		t.Errorf("newer member version: %v", err)
	}
}

func TestDecodeReplies(t *testing.T) {
	lease := []any{int64(1), "host-a", "42", int64(2000), int64(1500)}
	l, held, now, err := decodeLease(lease)
	if err != nil || !held || l != (fleet.Lease{Holder: "host-a", Epoch: 42, Expires: time.UnixMilli(2000)}) || !now.Equal(time.UnixMilli(1500)) {
		t.Errorf("decodeLease = %+v %v %v %v", l, held, now, err)
	}
	// A lease without expiry (set by hand) has a zero Expires.
	if l, held, _, err := decodeLease([]any{int64(0), "b", "7", int64(0), int64(1)}); err != nil || held || !l.Expires.IsZero() || l.Epoch != 7 {
		t.Errorf("decodeLease(no expiry) = %+v %v %v", l, held, err)
	}
	for _, bad := range []any{nil, "x", []any{int64(1)}, []any{int64(1), "a", "notanumber", int64(1), int64(1)}, []any{"x", "a", "1", int64(1), int64(1)}} {
		if _, _, _, err := decodeLease(bad); err == nil {
			t.Errorf("decodeLease(%#v) accepted", bad)
		}
	}

	p, pnow, err := decodeReadPlan([]any{int64(77), nil, nil, nil, nil})
	if err != nil || p.Epoch != 0 || !pnow.Equal(time.UnixMilli(77)) {
		t.Errorf("no plan: %+v %v %v", p, pnow, err)
	}
	// Plans no leader wrote (issue 27): above the lease's epoch, a
	// garbage epoch, another encoding. ErrBadPlan, with the server's clock.
	body := `{"v":1,"target":3,"shares":{"a":3}}`
	for _, bad := range [][]any{
		{int64(77), "9", "70", body, "8"},
		{int64(77), "9223372036854775807", "70", body, nil},
		{int64(77), "99999999999999999999999", "70", body, nil},
		{int64(77), "9", "70", `{"v":2}`, "9"},
	} {
		if p, pnow, err := decodeReadPlan(bad); !errors.Is(err, fleet.ErrBadPlan) || p.Epoch != 0 || !pnow.Equal(time.UnixMilli(77)) {
			t.Errorf("decodeReadPlan(%v) = %+v %v %v, want ErrBadPlan", bad, p, pnow, err)
		}
	}
	if p, _, err := decodeReadPlan([]any{int64(77), "8", "70", body, "8"}); err != nil || p.Epoch != 8 {
		t.Errorf("a plan of the lease's epoch: %+v %v", p, err)
	}

	members := []any{int64(5000),
		[]any{"a", `{"v":1,"capacity":2,"live":1}`, "b", `{"v":1,"capacity":4}`},
		[]any{"a", "1000", "b", "4000.5"}}
	ms, mnow, err := decodeMembers(members)
	want := []fleet.Member{{ID: "a", Capacity: 2, Live: 1, SeenAt: time.UnixMilli(1000)}, {ID: "b", Capacity: 4, SeenAt: time.UnixMilli(4000)}}
	if err != nil || !reflect.DeepEqual(ms, want) || !mnow.Equal(time.UnixMilli(5000)) {
		t.Errorf("decodeMembers = %+v %v %v", ms, mnow, err)
	}
	// A member this daemon cannot read is reported, not fatal to the rest.
	ms, _, err = decodeMembers([]any{int64(1), []any{"a", "{", "b", `{"v":2}`, "c", `{"v":1,"capacity":1}`}, []any{"c", "1"}})
	if err != nil || len(ms) != 3 || ms[0].Invalid == "" || ms[1].Invalid == "" || ms[2].Invalid != "" || ms[2].Capacity != 1 {
		t.Errorf("decodeMembers with broken members = %+v %v, want a and b invalid, c read", ms, err)
	}
}

// The arguments are checked before anything is sent: no server here.
func TestArgumentsRefused(t *testing.T) {
	s := New(config.Conn{URL: "redis://127.0.0.1:1"}, Options{})
	defer s.Close()
	ctx := context.Background()
	if _, _, err := s.Acquire(ctx, "p", "h", 0, 0); err == nil || !strings.Contains(err.Error(), "ttl") {
		t.Errorf("ttl 0: %v", err)
	}
	if _, _, err := s.Acquire(ctx, "p", "", 0, time.Second); err == nil || !strings.Contains(err.Error(), "holder") {
		t.Errorf("no holder: %v", err)
	}
	if _, _, err := s.Acquire(ctx, "P", "h", 0, time.Second); err == nil {
		t.Error("bad pool accepted")
	}
	if err := s.Heartbeat(ctx, "p", fleet.Member{}); err == nil {
		t.Error("member without id accepted")
	}
	if s.RoundTrips() != 0 {
		t.Errorf("%d round trips for refused arguments", s.RoundTrips())
	}
	// Nothing listens on port 1: the error names the pool, what failed,
	// and the server, as the sources' errors do.
	_, _, err := s.ReadPlan(ctx, "p")
	if want := "fleet pool p: read plan: fleet store redis://127.0.0.1:1: unreachable: "; err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Errorf("unreachable server: %v, want %q...", err, want)
	}
}
