package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flexiq/flexiq-scaled/internal/config"
	"github.com/flexiq/flexiq-scaled/internal/conn"
)

// connURL is the URL the store connects to, with the password put in,
// read by the PostgreSQL sources' own rules (conn.URL: the
// configuration, a root-only file or a systemd credential). It is read at
// each (re)connect, so a rotated password needs no reload. Errors name the
// file but never its content.
func connURL(c config.Conn) (*url.URL, error) {
	u, err := conn.URL(c)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("the URL from %s is not a postgres:// URL", c.URLOrigin())
	}
	return u, nil
}

// isConnFailure tells a failure that may be the connection's (a new pool,
// with the URL and password read again, may not have it) from a statement's
// error (which it would have too).
func isConnFailure(err error) bool {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Class 08 is connection exceptions, 28 authorization, 57P an
		// operator intervention (the server shutting down).
		return strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "57P")
	}
	return true // not the server's answer: network, TLS, timeout
}
