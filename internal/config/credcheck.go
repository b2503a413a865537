package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// CheckCredentials checks every network source's credentials against this
// machine, as the daemon does at start and at reload and as check-config
// does: each password_file and url_file must pass OpenSecretFile, and the
// URL a url_file holds must carry no credential in its query
// (CheckConnURL). systemd credentials are checked only where they exist, in
// the daemon's unit ($CREDENTIALS_DIRECTORY set). A problem refuses the
// configuration, so that a reload keeps the running one. The warnings are
// connWarnings, for the written URL and for the one read from a file.
func CheckCredentials(c *Config) (problems, warnings []Problem) {
	for _, p := range sortedPools(c) {
		file := c.FileOf(p.Name)
		checkConn(connOf(p.Source), func(list *[]Problem, key, msg string) {
			*list = append(*list, Problem{File: file, Key: poolKey(p, "source", key), Msg: msg})
		}, &problems, &warnings)
	}
	if c.Prometheus != nil {
		checkConn(c.Prometheus.Conn, func(list *[]Problem, key, msg string) {
			*list = append(*list, Problem{File: c.Path, Key: "prometheus." + key, Msg: msg})
		}, &problems, &warnings)
	}
	checkFleetConns(c, &problems, &warnings)
	return problems, warnings
}

// checkFleetConns judges the fleets' stores as checkConn does a source's,
// and the scheme of a URL that a file or credential holds: [fleet]'s, then
// each pool's own (one that only takes [fleet]'s is judged once, there).
func checkFleetConns(c *Config, problems, warnings *[]Problem) {
	check := func(conn Conn, file string, key func(string) string) {
		add := func(list *[]Problem, k, msg string) {
			*list = append(*list, Problem{File: file, Key: key(k), Msg: msg})
		}
		u := checkConn(conn, add, problems, warnings)
		if u != nil && conn.URL == "" {
			if _, err := FleetStoreOf(u.Scheme); err != nil {
				k := "url_file"
				if conn.URLFile == "" {
					k = "url_credential"
				}
				add(problems, k, fmt.Sprintf("the URL %s holds: %v", conn.URLOrigin(), err))
			}
		}
	}
	if c.Fleet != nil && c.Fleet.Conn != (Conn{}) {
		check(c.Fleet.Conn, c.Path, func(k string) string { return "fleet." + k })
	}
	for _, p := range sortedPools(c) {
		if !p.Joins() || (c.Fleet != nil && p.Fleet.Conn == c.Fleet.Conn) {
			continue
		}
		check(p.Fleet.Conn, c.FileOf(p.Name), func(k string) string { return poolKey(p, "fleet", k) })
	}
}

// checkConn judges one connection's secrets; add names the key. It returns
// the URL, written or read, when it could be read and is safe; else nil.
func checkConn(conn Conn, add func(list *[]Problem, key, msg string), problems, warnings *[]Problem) *url.URL {
	credDir := os.Getenv("CREDENTIALS_DIRECTORY") != ""
	hasPassword := conn.PasswordFile != "" || conn.PasswordCredential != ""
	if conn.PasswordFile != "" {
		if f, err := OpenSecretFile(conn.PasswordFile); err != nil {
			add(problems, "password_file", err.Error())
		} else {
			f.Close()
		}
	}
	if conn.PasswordCredential != "" && credDir {
		if _, err := ReadCredential(conn.PasswordCredential); err != nil {
			add(problems, "password_credential", err.Error())
		}
	}
	var u *url.URL
	urlKey := "url"
	switch {
	case conn.URL != "":
		u, _ = url.Parse(conn.URL) // Load refused one that does not parse
	case conn.URLFile != "" || (conn.URLCredential != "" && credDir):
		urlKey = "url_file"
		raw, err := "", error(nil)
		if conn.URLFile != "" {
			raw, err = ReadSecretFile(conn.URLFile)
		} else {
			urlKey = "url_credential"
			raw, err = ReadCredential(conn.URLCredential)
		}
		if err != nil {
			add(problems, urlKey, err.Error())
			break
		}
		if u, err = url.Parse(strings.TrimSpace(raw)); err != nil {
			add(problems, urlKey, fmt.Sprintf("what %s holds is not a URL (%s)", conn.URLOrigin(), urlParseError(err)))
			u = nil
			break
		}
		if err := CheckConnURL(u, true); err != nil {
			add(problems, urlKey, fmt.Sprintf("the URL %s holds %v", conn.URLOrigin(), err))
			u = nil
			break
		}
		if pw, has := u.User.Password(); has && pw != "" {
			hasPassword = true
		}
	}
	if u == nil {
		return nil
	}
	for _, w := range connWarnings(u, hasPassword) {
		add(warnings, urlKey, w)
	}
	return u
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
