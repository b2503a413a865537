package source

import (
	"context"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

func TestPgCount(t *testing.T) {
	tests := []struct {
		in      any
		want    int64
		wantErr string
	}{
		{int64(7), 7, ""},
		{int32(3), 3, ""},
		{int16(0), 0, ""},
		{float64(4), 4, ""},
		{pgtype.Numeric{Int: big.NewInt(12), Valid: true}, 12, ""},
		{pgtype.Numeric{Int: big.NewInt(125), Exp: -1, Valid: true}, 0, "whole number"},
		{nil, 0, "NULL"},
		{int64(-1), 0, ">= 0"},
		{2.5, 0, "whole number"},
		{"3", 0, "text"},
		{true, 0, "want a number"},
	}
	for _, tt := range tests {
		got, err := pgCount("pending", tt.in)
		switch {
		case tt.wantErr == "" && (err != nil || got != tt.want):
			t.Errorf("pgCount(%#v) = %d, %v, want %d", tt.in, got, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("pgCount(%#v) error %v, want one containing %q", tt.in, err, tt.wantErr)
		}
	}
}

// Each failure says what failed in words an operator can act on.
func TestDescribePgError(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		err   error
		stage string
		want  string
		conn  bool
	}{
		{&pgconn.PgError{Code: "28P01", Message: `password authentication failed for user "fq"`}, "connect", "authentication failed", true},
		{&pgconn.PgError{Code: "57014", Message: "canceling statement due to statement timeout"}, "query", "query timed out (statement_timeout)", false},
		{&pgconn.PgError{Code: "42P01", Message: `relation "pgboss.job" does not exist`}, "query", "is the queue system's schema installed", false},
		{&pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}, "query", "query failed", true},
		{errors.New("dial tcp 127.0.0.1:5432: connect: connection refused"), "connect", "cannot connect", true},
	}
	for _, tt := range tests {
		if got := describePgError(ctx, tt.stage, tt.err); !strings.Contains(got, tt.want) {
			t.Errorf("describePgError(%v) = %q, want it to contain %q", tt.err, got, tt.want)
		}
		if got := isConnFailure(tt.err); got != tt.conn {
			t.Errorf("isConnFailure(%v) = %v, want %v", tt.err, got, tt.conn)
		}
	}
}

// Every preset is registered, and a source that cannot connect says which
// type and server, without the password.
func TestPostgresPresetsUnreachable(t *testing.T) {
	for _, typ := range []string{TypePostgresQuery, TypeRiver, TypePgBoss, TypeGraphileWorker,
		TypeOban, TypeGoodJob, TypeSolidQueue} {
		// Port 1 on loopback: refused at once.
		spec := pgSpec(typ, config.Conn{URL: "postgres://fq@127.0.0.1:1/fq?connect_timeout=2"})
		src, err := New(spec)
		if err != nil {
			t.Fatalf("%s: New: %v", typ, err)
		}
		_, err = src.Observe(context.Background(), time.Now())
		src.Close()
		if err == nil || !strings.HasPrefix(err.Error(), typ+" source postgres://fq@127.0.0.1:1/fq") || !strings.Contains(err.Error(), "cannot connect") {
			t.Errorf("%s: Observe error %v, want one naming the type, the server and that it cannot connect", typ, err)
		}
	}
}

// pgSpec is a source of a PostgreSQL type connecting to conn, with the
// type's defaults (postgres-query with a constant query).
func pgSpec(typ string, conn config.Conn) config.Source {
	switch typ {
	case TypePostgresQuery:
		return config.Source{Type: typ, Settings: PostgresQuerySettings{Query: "SELECT 1 AS pending, 0 AS running", Conn: conn}}
	case TypeGoodJob, TypeSolidQueue:
		return config.Source{Type: typ, Settings: PgQueuesSettings{Conn: conn}}
	}
	return config.Source{Type: typ, Settings: PgPresetSettings{Conn: conn}}
}

// A PostgreSQL source names its server through conn.Redacted: no query
// value, whatever the parameter.
func TestPgDBServerRedacted(t *testing.T) {
	s := newPgDB(TypeRiver, config.Conn{URL: "postgres://app@db/q?sslrootcert=s3cret"})
	if strings.Contains(s.server, "s3cret") {
		t.Errorf("the PostgreSQL source shows %q", s.server)
	}
}
