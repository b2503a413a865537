package source

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/url"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
)

// fakePg is a hostile PostgreSQL server on 127.0.0.1: it refuses TLS ('N' to
// an SSLRequest), and then either asks for the password in clear and keeps
// it, or (huge > 0) answers the startup with a message that announces huge
// bytes and sends none of them.
type fakePg struct {
	addr string
	huge uint32

	mu        sync.Mutex
	passwords []string
	sslAsked  int
}

func newFakePg(t *testing.T, huge uint32) *fakePg {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	f := &fakePg{addr: ln.Addr().String(), huge: huge}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go f.serve(c)
		}
	}()
	return f
}

func (f *fakePg) serve(c net.Conn) {
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	be := pgproto3.NewBackend(c, c)
	msg, err := be.ReceiveStartupMessage()
	if err != nil {
		return
	}
	if _, ok := msg.(*pgproto3.SSLRequest); ok {
		f.mu.Lock()
		f.sslAsked++
		f.mu.Unlock()
		if _, err := c.Write([]byte{'N'}); err != nil {
			return
		}
		if msg, err = be.ReceiveStartupMessage(); err != nil {
			return
		}
	}
	if _, ok := msg.(*pgproto3.StartupMessage); !ok {
		return
	}
	if f.huge > 0 {
		// An ErrorResponse of f.huge bytes, of which a few come.
		hdr := []byte{'E', 0, 0, 0, 0}
		binary.BigEndian.PutUint32(hdr[1:], f.huge+4)
		c.Write(append(hdr, "SFATAL"...))
		time.Sleep(200 * time.Millisecond)
		return
	}
	be.Send(&pgproto3.AuthenticationCleartextPassword{})
	if err := be.Flush(); err != nil {
		return
	}
	be.SetAuthType(pgproto3.AuthTypeCleartextPassword)
	msg, err = be.Receive()
	if err != nil {
		return
	}
	if pm, ok := msg.(*pgproto3.PasswordMessage); ok {
		f.mu.Lock()
		f.passwords = append(f.passwords, pm.Password)
		f.mu.Unlock()
	}
	be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"})
	be.Flush()
}

func (f *fakePg) captured() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.passwords...)
}

// towards makes a connection configuration reach the fake whatever host its
// URL names, as a DNS answer or a route an attacker controls would: the URL
// keeps its remote host name, which is what the TLS default is judged on.
func (f *fakePg) towards(cc *pgx.ConnConfig) {
	cc.LookupFunc = func(context.Context, string) ([]string, error) { return []string{"127.0.0.1"}, nil }
	cc.DialFunc = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "tcp", f.addr)
	}
	for _, fb := range cc.Fallbacks {
		fb.Host = "127.0.0.1"
	}
}

// A server that refuses TLS used to get the password in clear: pgx's default,
// like libpq's, is sslmode=prefer, which takes the refusal for an answer and
// retries without TLS. For a server reached over a network the default is
// now verify-full, so the connection fails before the password is sent; a
// weaker mode written out still behaves as written (and check-config warns).
// Both the pool's configuration (reads) and a single connection's (the
// LISTEN watch) are tested.
func TestPostgresTLSDowngradeRefused(t *testing.T) {
	tests := []struct {
		name         string
		url          string
		wantPassword bool
	}{
		{"remote host, no sslmode: verify-full", "postgres://app:hunter2@db.example:5432/q", false},
		{"remote address, no sslmode: verify-full", "postgres://app:hunter2@192.0.2.7:5432/q", false},
		{"sslmode=prefer written out: the old default, downgraded", "postgres://app:hunter2@db.example:5432/q?sslmode=prefer", true},
	}
	for _, tc := range tests {
		for _, kind := range []string{"pool", "conn"} {
			t.Run(tc.name+"/"+kind, func(t *testing.T) {
				f := newFakePg(t, 0)
				u, _ := url.Parse(tc.url)
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var err error
				switch kind {
				case "pool":
					var cfg *pgxpool.Config
					if cfg, err = conn.PostgresPoolConfig(u); err != nil {
						t.Fatal(err)
					}
					f.towards(cfg.ConnConfig)
					var pool *pgxpool.Pool
					if pool, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
						t.Fatal(err)
					}
					err = pool.Ping(ctx)
					pool.Close()
				case "conn":
					var cfg *pgx.ConnConfig
					if cfg, err = conn.PostgresConfig(u); err != nil {
						t.Fatal(err)
					}
					f.towards(cfg)
					var c *pgx.Conn
					if c, err = pgx.ConnectConfig(ctx, cfg); err == nil {
						c.Close(ctx)
					}
				}
				if err == nil {
					t.Fatal("connected to a server that failed authentication")
				}
				got := f.captured()
				if tc.wantPassword != (len(got) > 0) {
					t.Fatalf("passwords the fake server received in clear: %q (err %v); want some: %v", got, err, tc.wantPassword)
				}
				if !tc.wantPassword && !strings.Contains(err.Error(), "refused TLS") {
					t.Errorf("err = %v, want the server's refusal of TLS", err)
				}
				if msg := describePgError(ctx, "connect", err); !tc.wantPassword && !strings.Contains(msg, "sslmode=disable") {
					t.Errorf("the journal's message %q does not say how to connect to a server without TLS", msg)
				}
			})
		}
	}
}

// A server that announces a 512 MiB message made pgx allocate it (up to
// about 1 GiB per message); now a message over conn.PostgresMaxMessage is refused
// before anything is allocated, and the read fails as for any outage.
func TestPostgresHugeMessage(t *testing.T) {
	f := newFakePg(t, 512<<20)
	s := mustNew(t, config.Source{Type: TypePostgresQuery, Settings: PostgresQuerySettings{
		Conn:  config.Conn{URL: "postgres://app:hunter2@" + f.addr + "/q"},
		Query: "SELECT 0 AS pending, 0 AS running"}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := s.Observe(ctx, time.Now())
	runtime.ReadMemStats(&after)
	wantErrContaining(t, err, "cannot connect")
	if !strings.Contains(err.Error(), "expected at most 1048576") {
		t.Errorf("err = %v, want the message refused for its length", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("the error shows the password: %v", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("one read allocated %d MiB for a message the server only announced", alloc>>20)
	}

	// The limit itself, on a single connection's configuration too.
	u, _ := url.Parse("postgres://app@" + f.addr + "/q")
	cfg, err := conn.PostgresConfig(u)
	if err != nil {
		t.Fatal(err)
	}
	_, err = pgx.ConnectConfig(ctx, cfg)
	var tooLong *pgproto3.ExceededMaxBodyLenErr
	if !errors.As(err, &tooLong) || tooLong.MaxExpectedBodyLen != conn.PostgresMaxMessage {
		t.Errorf("err = %v, want pgproto3.ExceededMaxBodyLenErr at %d", err, conn.PostgresMaxMessage)
	}
}
