package config

import (
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
)

// ConnKeys documents the connection keys every network source takes; what
// the URL's scheme must be is the type's to say, in its table's Doc.
var ConnKeys = []KeyDoc{
	{Name: "url", Type: "string", Limits: "exactly one of url, url_file and url_credential; no password in it",
		Doc: "Where the source connects, without a password: the password goes to `password_file` or `password_credential`."},
	{Name: "url_file", Type: "string", Limits: "absolute path; root-owned, not a symbolic link, no group or other access",
		Doc: "A root-only file holding the URL, for a URL that must not sit in the configuration."},
	{Name: "url_credential", Type: "string", Limits: "a systemd credential name",
		Doc: "A systemd credential (`LoadCredential=NAME:PATH` in a drop-in of the daemon's unit) holding the URL."},
	{Name: "password_file", Type: "string", Limits: "absolute path; root-owned, not a symbolic link, no group or other access; not with password_credential",
		Doc: "A root-only file holding the password, sent with the URL's user name."},
	{Name: "password_credential", Type: "string", Limits: "a systemd credential name; not with password_file",
		Doc: "A systemd credential holding the password."},
}

// Conn reads a network source's connection keys (ConnKeys) into c: exactly
// one of url, url_file and url_credential, with a scheme from schemes when
// the URL is written out, no credential in it (CheckConnURL: password_file
// or password_credential carry the password), and absolute paths. The files
// themselves are judged by hostcheck.CheckCredentials when the daemon loads
// or reloads the configuration, and by check-config: a missing or unsafe
// one refuses the configuration before the running one is dropped.
func (d *SourceDecoder) Conn(c *Conn, schemes ...string) {
	l, r, key := d.l, d.keys, d.key
	n := 0
	if l.str(key("url"), r["url"], &c.URL) {
		n++
		u, err := url.Parse(c.URL)
		switch {
		case err != nil:
			// url.Parse's error quotes the URL, password and all.
			l.add(key("url"), "not a URL: %s", urlParseError(err))
		case !slices.Contains(schemes, u.Scheme):
			l.add(key("url"), "scheme %q: want one of %v", u.Scheme, schemes)
		default:
			if err := CheckConnURL(u, false); err != nil {
				l.add(key("url"), "%v", err)
			}
		}
	}
	if l.str(key("url_file"), r["url_file"], &c.URLFile) {
		n++
		if !filepath.IsAbs(c.URLFile) {
			l.add(key("url_file"), "must be an absolute path")
		}
	}
	if l.str(key("url_credential"), r["url_credential"], &c.URLCredential) {
		n++
		l.credentialName(key("url_credential"), c.URLCredential)
	}
	switch {
	case n == 0:
		l.add(key("url"), "missing: set url, url_file or url_credential")
	case n > 1:
		l.add(key("url"), "set only one of url, url_file and url_credential")
	}
	if l.str(key("password_file"), r["password_file"], &c.PasswordFile) && !filepath.IsAbs(c.PasswordFile) {
		l.add(key("password_file"), "must be an absolute path")
	}
	if l.str(key("password_credential"), r["password_credential"], &c.PasswordCredential) {
		l.credentialName(key("password_credential"), c.PasswordCredential)
	}
	if c.PasswordFile != "" && c.PasswordCredential != "" {
		l.add(key("password_file"), "set either password_file or password_credential, not both")
	}
}

// credentialName checks a systemd credential's name: a file name in
// $CREDENTIALS_DIRECTORY.
func (r *reader) credentialName(key, name string) {
	if name == "" || name == "." || name == ".." || filepath.Base(name) != name {
		r.add(key, "%q is not a credential name (a plain file name, as in LoadCredential=NAME:PATH)", name)
	}
}

// URLOrigin names where a source's URL comes from, for messages that must
// not show the URL itself while it may still hold a secret.
func (c Conn) URLOrigin() string {
	switch {
	case c.URLFile != "":
		return c.URLFile
	case c.URLCredential != "":
		return "credential " + c.URLCredential
	}
	return "the configuration"
}

// ParseHeldURL parses the URL that c's url_file or url_credential holds
// (raw, as read) and judges it as CheckConnURL judges one read from a file.
// The error names where the URL came from, never the URL.
func (c Conn) ParseHeldURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, fmt.Errorf("what %s holds is not a URL (%s)", c.URLOrigin(), urlParseError(err))
	}
	if err := CheckConnURL(u, true); err != nil {
		return nil, fmt.Errorf("the URL %s holds %v", c.URLOrigin(), err)
	}
	return u, nil
}
