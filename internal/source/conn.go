package source

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// connURL is the URL a network source connects to, with the password put
// in: from the configuration, a root-only file, or a systemd credential
// ($CREDENTIALS_DIRECTORY, set by LoadCredential= in a drop-in). It is read
// at each connect, so a rotated password needs no reload. Errors name the
// file but never its content.
func connURL(c config.Conn) (*url.URL, error) {
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
		return nil, fmt.Errorf("the URL from %s is not a URL", secretOrigin(c))
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

func secretOrigin(c config.Conn) string {
	switch {
	case c.URLFile != "":
		return c.URLFile
	case c.URLCredential != "":
		return "credential " + c.URLCredential
	}
	return "the configuration"
}

// readSecret reads a credential file, which must not be readable by group or
// others when the daemon runs as root: a secret anyone can read is no secret,
// and the configuration promised to keep it out of reach.
func readSecret(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading credential file: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("reading credential file %s: %w", path, err)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && os.Geteuid() == 0 && fi.Mode().Perm()&0o044 != 0 {
		return "", fmt.Errorf("credential file %s is readable by group or others (mode %04o, uid %d): chmod 0600 it", path, fi.Mode().Perm(), st.Uid)
	}
	b := make([]byte, 64<<10)
	n, err := f.Read(b)
	if err != nil && n == 0 {
		return "", fmt.Errorf("reading credential file %s: %w", path, err)
	}
	return strings.TrimRight(string(b[:n]), "\r\n"), nil
}

// readCredential reads a systemd credential passed to the daemon's unit.
func readCredential(name string) (string, error) {
	dir := os.Getenv("CREDENTIALS_DIRECTORY")
	if dir == "" {
		return "", fmt.Errorf("credential %s: $CREDENTIALS_DIRECTORY is not set: add LoadCredential=%s:/path/to/secret to the daemon's unit (systemctl edit flexiq-scaled)", name, name)
	}
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("credential %s: %w", name, err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// redacted is u for messages: the password replaced by "xxxxx".
func redacted(u *url.URL) string { return u.Redacted() }
