// Package conn is the connection to a Redis or PostgreSQL server, for
// every client of one: the queue sources (internal/source) and the fleet's
// coordination stores (internal/fleet/redisstore, internal/fleet/pgstore).
// One set of rules everywhere: where a URL and its password come from (the
// configuration, a root-only file, a systemd credential), read again at
// each connect; TLS verified by default; short timeouts; a bound on what a
// hostile server can make the daemon allocate; and no credential in any
// message (Redacted, and the parsers' errors stripped of the URL).
package conn

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// URL is the URL a client connects to, with the password put in: from the
// configuration, a root-only file, or a systemd credential
// ($CREDENTIALS_DIRECTORY, set by LoadCredential= in a drop-in). Call it at
// each connect, so that a rotated password needs no reload. Errors name the
// file but never its content.
func URL(c config.Conn) (*url.URL, error) {
	raw := c.URL
	var err error
	switch {
	case c.URLFile != "":
		raw, err = readSecret(c.URLFile)
	case c.URLCredential != "":
		raw, err = readCredential(c.URLCredential)
	}
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		// url.Parse quotes the input, which may hold a password.
		return nil, fmt.Errorf("the URL from %s is not a URL", c.URLOrigin())
	}
	// Checked at load too (a written URL's password as well); a file may
	// have changed since.
	if err := config.CheckConnURL(u, true); err != nil {
		return nil, fmt.Errorf("the URL from %s %w", c.URLOrigin(), err)
	}
	password, havePassword := "", false
	switch {
	case c.PasswordFile != "":
		password, err = readSecret(c.PasswordFile)
		havePassword = true
	case c.PasswordCredential != "":
		password, err = readCredential(c.PasswordCredential)
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

// readSecret reads a credential file: config.ReadSecretFile, the same rules
// (not a link, a regular file, root's, no access for group or others) that
// hostcheck.CheckCredentials applied when the configuration was loaded, since the
// file may have changed since.
func readSecret(path string) (string, error) { return config.ReadSecretFile(path) }

// readCredential reads a systemd credential passed to the daemon's unit.
func readCredential(name string) (string, error) { return config.ReadCredential(name) }

// Redacted is u for messages: config.RedactURL, which hides the password
// and every query value. Every message that shows a server's URL goes
// through it.
func Redacted(u *url.URL) string { return config.RedactURL(u) }
