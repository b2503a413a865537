package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/flexiq/flexiq-scaled/internal/conn"
	"github.com/jackc/pgx/v5"
)

// Listener hears Release's notifications, so that a follower tries to
// acquire at once instead of at its next renewal (issue 20's "another host
// leads within a second"). It holds a connection of its own, outside the
// pool, since LISTEN is session state; it is an optimisation only: a
// follower that has none, or loses it, still acquires after the TTL.
// Behind PgBouncer in transaction mode, LISTEN does not work: do without.
//
//	l, err := store.Listen(ctx, "web")
//	for {
//		pool, err := l.Wait(ctx) // returns when "web" is released
//		... store.Acquire(ctx, pool, me, 0, ttl)
//	}
type Listener struct {
	conn  *pgx.Conn
	chans map[string]string // channel -> pool
}

// Listen connects and LISTENs on each pool's Channel.
func (s *Store) Listen(ctx context.Context, pools ...string) (*Listener, error) {
	u, err := connURL(s.conn)
	if err != nil {
		return nil, fmt.Errorf("fleet store %s: listening: %w", s.server, err)
	}
	cfg, err := conn.PostgresConfig(u)
	if err != nil {
		return nil, fmt.Errorf("fleet store %s: listening: not a valid PostgreSQL URL", s.server)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	cfg.RuntimeParams["application_name"] = s.opts.ApplicationName
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("fleet store %s: listening: %w", s.server, err)
	}
	l := &Listener{conn: conn, chans: map[string]string{}}
	for _, pool := range pools {
		ch := Channel(pool)
		l.chans[ch] = pool
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			conn.Close(context.WithoutCancel(ctx))
			return nil, fmt.Errorf("fleet store %s: listening on %s: %w", s.server, ch, err)
		}
	}
	return l, nil
}

// Wait returns the pool whose lease was released, when one is; an error
// when ctx ends or the connection fails (then Close and Listen again).
func (l *Listener) Wait(ctx context.Context) (string, error) {
	for {
		n, err := l.conn.WaitForNotification(ctx)
		if err != nil {
			return "", fmt.Errorf("fleet store: waiting for a release: %w", err)
		}
		if pool, ok := l.chans[n.Channel]; ok && n.Payload == pool {
			return pool, nil
		}
	}
}

// Close closes the listener's connection.
func (l *Listener) Close(ctx context.Context) error {
	if l == nil || l.conn == nil {
		return errors.New("fleet store: closing a listener that is not open")
	}
	return l.conn.Close(ctx)
}
