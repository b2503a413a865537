package pgstore

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/fleet"
)

// Channel names fit PostgreSQL's 63 bytes, differ between pools and are
// stable.
func TestChannel(t *testing.T) {
	long := strings.Repeat("p", 80)
	tests := []struct {
		pool, want string
	}{
		{"web", "flexiq_fleet_web"},
		{"a.b-c", "flexiq_fleet_a.b-c"},
		{strings.Repeat("x", 50), "flexiq_fleet_" + strings.Repeat("x", 50)},
	}
	for _, tt := range tests {
		if got := Channel(tt.pool); got != tt.want {
			t.Errorf("Channel(%q) = %q, want %q", tt.pool, got, tt.want)
		}
	}
	a, b := Channel(long), Channel(long+"q")
	if len(a) > 63 || len(b) > 63 || a == b || a != Channel(long) || !strings.HasPrefix(a, "flexiq_fleet_") {
		t.Errorf("long pools' channels %q and %q: want distinct, stable, at most 63 bytes", a, b)
	}
}

// The tables are quoted identifiers, qualified by the schema when one is
// set; the DDL is idempotent and the lease table logged.
func TestSchemaSQL(t *testing.T) {
	tests := []struct {
		schema, wantLease string
		wantCreateSchema  bool
	}{
		{"", `"flexiq_fleet_lease"`, false},
		{"fleet", `"fleet"."flexiq_fleet_lease"`, true},
		{`we"ird`, `"we""ird"."flexiq_fleet_lease"`, true},
	}
	for _, tt := range tests {
		ddl := SchemaSQL(tt.schema)
		if n := newNames(tt.schema); n.lease != tt.wantLease {
			t.Errorf("schema %q: lease table %s, want %s", tt.schema, n.lease, tt.wantLease)
		}
		if got := strings.Contains(ddl, "CREATE SCHEMA IF NOT EXISTS"); got != tt.wantCreateSchema {
			t.Errorf("schema %q: creates the schema %v, want %v", tt.schema, got, tt.wantCreateSchema)
		}
		if c, ine := strings.Count(ddl, "CREATE "), strings.Count(ddl, " IF NOT EXISTS "); c != ine || c < 3 {
			t.Errorf("schema %q: %d CREATE, %d IF NOT EXISTS: every one must be idempotent:\n%s", tt.schema, c, ine, ddl)
		}
		if strings.Contains(strings.ToUpper(ddl), "UNLOGGED") || strings.Contains(strings.ToUpper(ddl), "TEMP") {
			t.Errorf("schema %q: the tables must be logged and lasting:\n%s", tt.schema, ddl)
		}
		if !strings.Contains(existsSQL(tt.schema), strings.ReplaceAll(tt.wantLease, "'", "''")) {
			t.Errorf("schema %q: existsSQL does not look for %s: %s", tt.schema, tt.wantLease, existsSQL(tt.schema))
		}
	}
}

// What no statement may contain: session state (advisory locks, SET,
// PREPARE) and the host's clock.
func TestStatementsKeepNoSession(t *testing.T) {
	st := buildStatements(newNames(""))
	for name, sql := range map[string]string{"acquire": st.acquire, "release": st.release, "heartbeat": st.heartbeat,
		"members": st.members, "writePlan": st.writePlan, "readPlan": st.readPlan} {
		low := strings.ToLower(sql)
		for _, bad := range []string{"advisory", "set local", "set session", "prepare", "listen", "begin", "commit"} {
			if strings.Contains(low, bad) {
				t.Errorf("%s contains %q:\n%s", name, bad, sql)
			}
		}
		if strings.Count(sql, ";") > 0 {
			t.Errorf("%s is more than one statement:\n%s", name, sql)
		}
	}
	// The renewal clause names holder AND epoch (Oban #1488), next to
	// expiry (River #197); the real tests show that it works.
	if !strings.Contains(st.acquire, "WHERE l.expires_at <= now() OR (l.holder = excluded.holder AND l.epoch = $3::bigint)") {
		t.Errorf("acquire's guard changed:\n%s", st.acquire)
	}
}

func TestPlanEncoding(t *testing.T) {
	tests := []struct {
		shares map[string]int
		state  []byte
	}{
		{nil, nil},
		{map[string]int{}, []byte{}},
		{map[string]int{"b": 2, "a": 0, "host\"x": 7}, []byte{0, '\\', 0xff, 'x', '\''}},
	}
	for _, tt := range tests {
		js, err := encodeShares(tt.shares)
		if err != nil {
			t.Fatal(err)
		}
		hexState := hex.EncodeToString(tt.state)
		p, err := decodePlan(3, 5, js, &hexState, time.Unix(10, 0))
		if err != nil {
			t.Fatalf("decodePlan(%s): %v", js, err)
		}
		if p.Epoch != 3 || p.Target != 5 || len(p.Shares) != len(tt.shares) || !bytes.Equal(p.State, tt.state) {
			t.Errorf("round trip of %v %x: %+v", tt.shares, tt.state, p)
		}
		for k, v := range tt.shares {
			if p.Shares[k] != v {
				t.Errorf("share %q: %d, want %d", k, p.Shares[k], v)
			}
		}
	}
	bad := "zz"
	if _, err := decodePlan(1, 1, "{}", &bad, time.Time{}); err == nil {
		t.Error("decodePlan accepted a state that is not hex")
	}
	if _, err := decodePlan(1, 1, "[1]", nil, time.Time{}); err == nil {
		t.Error("decodePlan accepted shares that are not an object")
	}
}

func TestClampAndEpoch(t *testing.T) {
	if clampInt32(math.MaxInt64) != math.MaxInt32 || clampInt32(-5) != -5 || clampInt32(math.MinInt64) != math.MinInt32 {
		t.Error("clampInt32 does not clamp")
	}
	if _, err := epochArg(math.MaxUint64); err == nil {
		t.Error("epochArg accepted an epoch beyond a bigint")
	}
	if e, err := epochArg(42); err != nil || e != 42 {
		t.Errorf("epochArg(42) = %d, %v", e, err)
	}
}

// Arguments that cannot be right fail before any network, and nothing is
// dialled by New.
func TestBadArguments(t *testing.T) {
	s := New(config.Conn{URL: "postgres://fq@127.0.0.1:1/fq"}, Options{})
	defer s.Close()
	ctx := context.Background()
	if _, _, err := s.Acquire(ctx, "p", "", 0, time.Second); err == nil {
		t.Error("Acquire with an empty holder: no error")
	}
	if _, _, err := s.Acquire(ctx, "p", "h", 0, 0); err == nil {
		t.Error("Acquire with no TTL: no error")
	}
	if err := s.Heartbeat(ctx, "p", fleet.Member{}); err == nil {
		t.Error("Heartbeat without an id: no error")
	}
	if err := s.WritePlan(ctx, "p", "h", math.MaxUint64, fleet.Plan{}); err == nil {
		t.Error("WritePlan with an epoch beyond a bigint: no error")
	}
	if st := s.Stats(); st.Statements != 0 || st.Connects != 0 {
		t.Errorf("Stats after bad arguments: %+v, want nothing sent", st)
	}
}

// An unreachable server: every method fails quickly, naming the store, the
// server (without the password), the operation and the pool; never
// ErrFenced.
func TestUnreachable(t *testing.T) {
	s := New(config.Conn{URL: "postgres://fq:hunter2@127.0.0.1:1/fq?connect_timeout=2"}, Options{Timeout: 3 * time.Second})
	defer s.Close()
	ctx := context.Background()
	_, _, errA := s.Acquire(ctx, "web", "h1", 0, time.Second)
	errR := s.Release(ctx, "web", "h1", 1)
	errH := s.Heartbeat(ctx, "web", fleet.Member{ID: "h1"})
	_, _, errM := s.Members(ctx, "web")
	errW := s.WritePlan(ctx, "web", "h1", 1, fleet.Plan{})
	_, _, errP := s.ReadPlan(ctx, "web")
	for i, err := range []error{errA, errR, errH, errM, errW, errP} {
		switch {
		case err == nil:
			t.Errorf("call %d: no error", i)
		case errors.Is(err, fleet.ErrFenced):
			t.Errorf("call %d: ErrFenced for an unreachable server: %v", i, err)
		case strings.Contains(err.Error(), "hunter2"):
			t.Errorf("call %d: the error shows the password: %v", i, err)
		case !strings.HasPrefix(err.Error(), "fleet store postgres://fq:xxxxx@127.0.0.1:1/fq") || !strings.Contains(err.Error(), `pool "web"`):
			t.Errorf("call %d: error %q, want one naming the store, server and pool", i, err)
		}
	}
}
