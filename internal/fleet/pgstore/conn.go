package pgstore

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// connURL is the URL the store connects to, with the password put in: from
// the configuration, a root-only file or a systemd credential, with the
// same keys and rules as the PostgreSQL sources (internal/source's connURL,
// which is unexported; to wire, both should call one exported function).
// It is read at each (re)connect, so a rotated password needs no reload.
// Errors name the file but never its content.
func connURL(c config.Conn) (*url.URL, error) {
	raw := c.URL
	var err error
	switch {
	case c.URLFile != "":
		raw, err = config.ReadSecretFile(c.URLFile)
	case c.URLCredential != "":
		raw, err = config.ReadCredential(c.URLCredential)
	}
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Parse quotes the input, which may hold a password.
		return nil, fmt.Errorf("the URL from %s is not a URL", c.URLOrigin())
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("the URL from %s is not a postgres:// URL", c.URLOrigin())
	}
	if err := config.CheckConnURL(u, true); err != nil {
		return nil, fmt.Errorf("the URL from %s %w", c.URLOrigin(), err)
	}
	password, havePassword := "", false
	switch {
	case c.PasswordFile != "":
		password, err = config.ReadSecretFile(c.PasswordFile)
		havePassword = true
	case c.PasswordCredential != "":
		password, err = config.ReadCredential(c.PasswordCredential)
		havePassword = true
	}
	if err != nil {
		return nil, err
	}
	if havePassword {
		user := ""
		if u.User != nil {
			user = u.User.Username()
		}
		u.User = url.UserPassword(user, strings.TrimRight(password, "\r\n"))
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
