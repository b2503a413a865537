package config

import (
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
)

// A connection URL reaches the journal, the status output (which the
// read-only group sees) and check-config's output in every error about its
// source. Only the user name, host, port and path say where the daemon
// connects; anything else in it may be a secret. These functions are the
// one place that decides what of a URL may be shown and what may be in it.

// redactedValue replaces what RedactURL hides, as url.URL.Redacted does.
const redactedValue = "xxxxx"

// RedactURL is u as every message shows it: the password and every query
// value replaced by "xxxxx", and the fragment dropped. Query names are kept,
// since they say which setting is meant (sslmode=xxxxx); a query part that
// is not NAME=VALUE is hidden whole, since it may be nothing but a secret.
func RedactURL(u *url.URL) string {
	if u == nil {
		return ""
	}
	r := *u
	if r.User != nil {
		if _, has := r.User.Password(); has {
			r.User = url.UserPassword(r.User.Username(), redactedValue)
		}
	}
	r.Fragment, r.RawFragment = "", ""
	r.ForceQuery = false
	if r.RawQuery != "" {
		parts := strings.FieldsFunc(r.RawQuery, func(c rune) bool { return c == '&' || c == ';' })
		for i, p := range parts {
			name, _, hasValue := strings.Cut(p, "=")
			if !hasValue {
				parts[i] = redactedValue
				continue
			}
			parts[i] = name + "=" + redactedValue
		}
		r.RawQuery = strings.Join(parts, "&")
	}
	return r.String()
}

// RedactURLString is RedactURL for a URL as written; one that does not
// parse is not shown at all, since url.Parse's own error quotes it whole.
func RedactURLString(s string) string {
	u, err := url.Parse(strings.TrimSpace(s))
	if err != nil {
		return "(a URL that does not parse)"
	}
	return RedactURL(u)
}

// urlParseError is url.Parse's complaint without the URL it quotes (which
// may carry a password) or the quoted fragment of it.
func urlParseError(err error) string {
	var msg string
	if ue, ok := err.(*url.Error); ok {
		msg = ue.Err.Error()
	} else {
		msg = err.Error()
	}
	return quotedRE.ReplaceAllString(msg, "(…)")
}

var quotedRE = regexp.MustCompile(`"[^"]*"`)

// RefusedQueryParams are the query parameter names a connection URL must not
// carry, because their values are credentials: libpq's password and
// sslpassword, and the names HTTP services and proxies take tokens under.
// A name is refused when, lowercased and with "-" read as "_", it is one of
// refusedParamNames or contains one of refusedParamParts. The
// credentials go to password_file or password_credential, or the whole URL
// to url_file or url_credential, where they are never shown.
var (
	refusedParamNames = []string{"pass", "pwd", "key", "apikey", "api_key", "auth", "sig", "signature", "bearer"}
	refusedParamParts = []string{"password", "passwd", "secret", "token", "api_key", "apikey", "credential"}
)

// RefusedQueryParam returns the first query parameter of u whose name says
// it carries a credential, and whether there is one.
func RefusedQueryParam(u *url.URL) (string, bool) {
	for _, p := range strings.FieldsFunc(u.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
		raw, _, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(raw)
		if err != nil {
			name = raw
		}
		norm := strings.ReplaceAll(strings.ToLower(name), "-", "_")
		if slices.Contains(refusedParamNames, norm) {
			return name, true
		}
		for _, part := range refusedParamParts {
			if strings.Contains(norm, part) {
				return name, true
			}
		}
	}
	return "", false
}

// CheckConnURL refuses a connection URL that carries a credential where it
// would be shown: a query parameter RefusedQueryParam names, and, in a URL
// written in the configuration (inFile false), a password in
// user:password@. A URL read from url_file or url_credential may hold its
// password there: it is as secret as the file, and messages redact it. The
// message never quotes the URL.
func CheckConnURL(u *url.URL, inFile bool) error {
	if u.User != nil && !inFile {
		if _, has := u.User.Password(); has {
			return fmt.Errorf("carries a password: the configuration must not hold credentials in clear; " +
				"put the password in password_file (readable by root only) or a systemd credential (password_credential), " +
				"or the whole URL in url_file")
		}
	}
	if name, bad := RefusedQueryParam(u); bad {
		return fmt.Errorf("carries the query parameter %q, which holds a credential and would reach every message about this source: "+
			"put a password in password_file or password_credential, or in user:password@ of a URL in url_file or url_credential, "+
			"never in the query", name)
	}
	return nil
}

// LocalHost says whether a URL's host is this machine reached without a
// network: a Unix socket (a path), or a loopback address written out
// ("localhost", 127.0.0.0/8, ::1). A name is not resolved: what it resolves
// to may change, and the default must not depend on DNS.
func LocalHost(host string) bool {
	if host == "" || strings.HasPrefix(host, "/") || strings.HasPrefix(host, "@") {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// postgresHosts are the hosts a PostgreSQL URL names: those of its
// authority (host1:port,host2:port, or a percent-encoded socket directory)
// and of its host= parameter. None means libpq's default, the local socket.
func postgresHosts(u *url.URL) []string {
	var hosts []string
	if u.Host != "" {
		for _, h := range strings.Split(u.Host, ",") {
			if dec, err := url.PathUnescape(h); err == nil {
				h = dec
			}
			hosts = append(hosts, h)
		}
	}
	for _, v := range u.Query()["host"] {
		for _, h := range strings.Split(v, ",") {
			hosts = append(hosts, h)
		}
	}
	return hosts
}

// PostgresRemote says whether a PostgreSQL URL reaches any host over a
// network, where TLS must protect the password.
func PostgresRemote(u *url.URL) bool {
	for _, h := range postgresHosts(u) {
		if !LocalHost(h) {
			return true
		}
	}
	return false
}

// PostgresSSLMode is the TLS mode a URL asks for: its sslmode, or
// "require" for ssl=true; "" when it says nothing.
func PostgresSSLMode(u *url.URL) string {
	q := u.Query()
	if m := q.Get("sslmode"); m != "" {
		return m
	}
	if q.Get("ssl") == "true" {
		return "require"
	}
	return ""
}

// PostgresDefaultTLS is u with sslmode=verify-full added when it reaches a
// host over a network and names no mode itself. libpq's (and pgx's) default
// is "prefer", which takes a server's refusal of TLS for an answer and then
// sends the password in clear to whoever answered; "verify-full" checks the
// server's certificate and name, against the system's CAs unless
// sslrootcert names others.
func PostgresDefaultTLS(u *url.URL) *url.URL {
	if !PostgresRemote(u) || PostgresSSLMode(u) != "" {
		return u
	}
	r := *u
	q := r.Query()
	q.Set("sslmode", "verify-full")
	r.RawQuery = q.Encode()
	return &r
}

// ConnWarnings are the warnings about how a source's URL reaches its
// server: a weaker TLS mode written out for a remote PostgreSQL server, a
// password sent to a remote Redis without TLS, basic authentication over
// plain HTTP to a remote server. Each is allowed, since a private network
// may make it safe, but the operator should know.
func ConnWarnings(u *url.URL, hasPassword bool) []string {
	var out []string
	switch u.Scheme {
	case "postgres", "postgresql":
		if !PostgresRemote(u) {
			break
		}
		switch m := PostgresSSLMode(u); m {
		case "", "verify-full":
		default:
			out = append(out, fmt.Sprintf("sslmode %q to a remote server: the password and the data may go in clear or to an impostor; "+
				"the default, when sslmode is left out, is verify-full", m))
		}
	case "redis":
		if hasPassword && !LocalHost(u.Host) {
			out = append(out, "redis:// to a remote server sends the password in clear: use rediss:// (TLS)")
		}
	case "http":
		if hasPassword && !LocalHost(u.Host) {
			out = append(out, "http:// to a remote server sends the basic-authentication password in clear: use https://")
		}
	}
	return out
}
