package hostcheck

import (
	"fmt"
	"net/url"
	"os"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// CheckCredentials checks every network source's credentials against this
// machine, as the daemon does at start and at reload and as check-config
// does: each password_file and url_file must pass config.OpenSecretFile,
// and the URL a url_file holds must carry no credential in its query
// (config.CheckConnURL). systemd credentials are checked only where they
// exist, in the daemon's unit ($CREDENTIALS_DIRECTORY set). A problem refuses the
// configuration, so that a reload keeps the running one. The warnings are
// config.ConnWarnings, for the written URL and for the one read from a file.
func CheckCredentials(c *config.Config) (problems, warnings []config.Problem) {
	for _, p := range c.SortedPools() {
		file := c.FileOf(p.Name)
		checkConn(connOf(p.Source), func(list *[]config.Problem, key, msg string) {
			*list = append(*list, config.Problem{File: file, Key: config.PoolKey(p, "source", key), Msg: msg})
		}, &problems, &warnings)
	}
	if c.Prometheus != nil {
		checkConn(c.Prometheus.Conn, func(list *[]config.Problem, key, msg string) {
			*list = append(*list, config.Problem{File: c.Path, Key: "prometheus." + key, Msg: msg})
		}, &problems, &warnings)
	}
	checkFleetConns(c, &problems, &warnings)
	return problems, warnings
}

// checkFleetConns judges the fleets' stores as checkConn does a source's,
// and the scheme of a URL that a file or credential holds: [fleet]'s, then
// each pool's own (one that only takes [fleet]'s is judged once, there).
func checkFleetConns(c *config.Config, problems, warnings *[]config.Problem) {
	check := func(conn config.Conn, file string, key func(string) string) {
		add := func(list *[]config.Problem, k, msg string) {
			*list = append(*list, config.Problem{File: file, Key: key(k), Msg: msg})
		}
		u := checkConn(conn, add, problems, warnings)
		if u != nil && conn.URL == "" {
			if _, err := config.FleetStoreOf(u.Scheme); err != nil {
				k := "url_file"
				if conn.URLFile == "" {
					k = "url_credential"
				}
				add(problems, k, fmt.Sprintf("the URL %s holds: %v", conn.URLOrigin(), err))
			}
		}
	}
	if c.Fleet != nil && c.Fleet.Conn != (config.Conn{}) {
		check(c.Fleet.Conn, c.Path, func(k string) string { return "fleet." + k })
	}
	for _, p := range c.SortedPools() {
		if !p.Joins() || (c.Fleet != nil && p.Fleet.Conn == c.Fleet.Conn) {
			continue
		}
		check(p.Fleet.Conn, c.FileOf(p.Name), func(k string) string { return config.PoolKey(p, "fleet", k) })
	}
}

// checkConn judges one connection's secrets; add names the key. It returns
// the URL, written or read, when it could be read and is safe; else nil.
func checkConn(conn config.Conn, add func(list *[]config.Problem, key, msg string), problems, warnings *[]config.Problem) *url.URL {
	credDir := os.Getenv("CREDENTIALS_DIRECTORY") != ""
	hasPassword := conn.PasswordFile != "" || conn.PasswordCredential != ""
	if conn.PasswordFile != "" {
		if f, err := config.OpenSecretFile(conn.PasswordFile); err != nil {
			add(problems, "password_file", err.Error())
		} else {
			f.Close()
		}
	}
	if conn.PasswordCredential != "" && credDir {
		if _, err := config.ReadCredential(conn.PasswordCredential); err != nil {
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
			raw, err = config.ReadSecretFile(conn.URLFile)
		} else {
			urlKey = "url_credential"
			raw, err = config.ReadCredential(conn.URLCredential)
		}
		if err != nil {
			add(problems, urlKey, err.Error())
			break
		}
		if u, err = conn.ParseHeldURL(raw); err != nil {
			add(problems, urlKey, err.Error())
			break
		}
		if pw, has := u.User.Password(); has && pw != "" {
			hasPassword = true
		}
	}
	if u == nil {
		return nil
	}
	for _, w := range config.ConnWarnings(u, hasPassword) {
		add(warnings, urlKey, w)
	}
	return u
}

// connOf is where s connects: its settings' Conn, zero for a source that
// does not connect.
func connOf(s config.Source) config.Conn {
	if c, ok := s.Settings.(interface{ SourceConn() config.Conn }); ok {
		return c.SourceConn()
	}
	return config.Conn{}
}
