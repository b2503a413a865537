package hostcheck

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// Credential files are judged when the configuration is loaded (CheckMachine,
// check-config), not first when the source connects: a missing, linked,
// foreign or open one is a problem naming the file and the key.
func TestCheckCredentials(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good.pw", "hunter2\n", 0o600)
	readOnly := write("ro.pw", "hunter2\n", 0o400)
	worldReadable := write("644.pw", "hunter2\n", 0o644)
	groupWritable := write("622.pw", "hunter2\n", 0o622)
	groupReadable := write("640.pw", "hunter2\n", 0o640)
	link := filepath.Join(dir, "link.pw")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.pw")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	subdir := filepath.Join(dir, "sub")
	if err := os.Mkdir(subdir, 0o700); err != nil {
		t.Fatal(err)
	}
	foreign := write("foreign.pw", "hunter2\n", 0o600)
	if os.Geteuid() == 0 {
		if err := os.Chown(foreign, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	goodURL := write("good.url", "postgres://app:hunter2@db.example/q\n", 0o600)
	queryURL := write("query.url", "postgres://app@db.example/q?password=hunter2\n", 0o600)
	tokenURL := write("token.url", "https://prom.example/?api_key=hunter2\n", 0o600)
	badURL := write("bad.url", "postgres://app:hun%zzter2@db.example/q\n", 0o600)
	weakURL := write("weak.url", "postgres://app:hunter2@db.example/q?sslmode=require\n", 0o600)

	pg := func(conn string) string {
		return "[pools.q]\nexec = [\"/bin/true\"]\n[pools.q.source]\ntype = \"river\"\n" + conn + "\n"
	}
	prom := func(conn string) string {
		return "[pools.q]\nexec = [\"/bin/true\"]\n[pools.q.source]\ntype = \"prometheus\"\npending_query = \"up\"\n" + conn + "\n"
	}
	redis := func(conn string) string {
		return "[pools.q]\nexec = [\"/bin/true\"]\n[pools.q.source]\ntype = \"rq\"\nqueues = [\"q\"]\n" + conn + "\n"
	}
	url := func(u string) string { return "url = \"" + u + "\"\n" }
	pwFile := func(p string) string { return "password_file = \"" + p + "\"\n" }
	urlFile := func(p string) string { return "url_file = \"" + p + "\"\n" }

	type tc struct {
		name    string
		text    string
		key     string // the key of the one problem or warning; "" for none
		msg     string
		warning bool
	}
	tests := []tc{
		{"good password file", pg(url("postgres://app@db.example/q") + pwFile(good)), "", "", false},
		{"read-only password file", pg(url("postgres://app@db.example/q") + pwFile(readOnly)), "", "", false},
		{"missing password file", pg(url("postgres://app@db.example/q") + pwFile(filepath.Join(dir, "nope"))), "password_file",
			"does not exist: deploy the file before the configuration that names it", false},
		{"world-readable password file", pg(url("postgres://app@db.example/q") + pwFile(worldReadable)), "password_file",
			"gives group or others access (mode 0644): chmod 0600 " + worldReadable, false},
		{"group-writable password file", pg(url("postgres://app@db.example/q") + pwFile(groupWritable)), "password_file",
			"gives group or others access (mode 0622)", false},
		{"group-readable password file", pg(url("postgres://app@db.example/q") + pwFile(groupReadable)), "password_file",
			"gives group or others access (mode 0640)", false},
		{"symlinked password file", pg(url("postgres://app@db.example/q") + pwFile(link)), "password_file",
			"is a symbolic link", false},
		{"fifo password file", pg(url("postgres://app@db.example/q") + pwFile(fifo)), "password_file",
			"is not a regular file", false},
		{"directory as password file", pg(url("postgres://app@db.example/q") + pwFile(subdir)), "password_file",
			"is not a regular file", false},
		{"good url file", pg(urlFile(goodURL)), "", "", false},
		{"missing url file", pg(urlFile(filepath.Join(dir, "nope.url"))), "url_file", "does not exist", false},
		{"url file with a password in the query", pg(urlFile(queryURL)), "url_file", `the URL ` + queryURL + ` holds carries the query parameter "password"`, false},
		{"url file with a token in the query", prom(urlFile(tokenURL)), "url_file", `query parameter "api_key"`, false},
		{"url file that is not a URL", pg(urlFile(badURL)), "url_file", "is not a URL", false},
		{"world-readable url file", pg(urlFile(worldReadable)), "url_file", "mode 0644", false},

		// Allowed, but warned about: the way to the server is not
		// protected.
		{"remote postgres, sslmode=require", pg(url("postgres://app@db.example/q?sslmode=require") + pwFile(good)), "url", `sslmode "require" to a remote server`, true},
		{"remote postgres, sslmode=disable", pg(url("postgres://app@db.example/q?sslmode=disable")), "url", `sslmode "disable"`, true},
		{"remote postgres, sslmode=verify-ca", pg(url("postgres://app@db.example/q?sslmode=verify-ca")), "url", `sslmode "verify-ca"`, true},
		{"remote postgres, ssl=true", pg(url("postgres://app@db.example/q?ssl=true")), "url", `sslmode "require"`, true},
		{"remote postgres from a url file, sslmode=require", pg(urlFile(weakURL)), "url_file", `sslmode "require"`, true},
		{"remote postgres, default", pg(url("postgres://app@db.example/q")), "", "", true},
		{"remote postgres, verify-full", pg(url("postgres://app@db.example/q?sslmode=verify-full")), "", "", true},
		{"loopback postgres, disable", pg(url("postgres://app@127.0.0.1:5432/q?sslmode=disable") + pwFile(good)), "", "", true},
		{"socket postgres, disable", pg(url("postgres://app@/q?host=/run/postgresql&sslmode=disable")), "", "", true},
		{"remote redis with a password", redis(url("redis://r.example:6379/0") + pwFile(good)), "url", "use rediss://", true},
		{"remote redis without a password", redis(url("redis://r.example:6379/0")), "", "", true},
		{"remote rediss with a password", redis(url("rediss://r.example:6379/0") + pwFile(good)), "", "", true},
		{"loopback redis with a password", redis(url("redis://localhost:6379/0") + pwFile(good)), "", "", true},
		{"remote http with basic auth", prom(url("http://metrics@prom.example:9090") + pwFile(good)), "url", "use https://", true},
		{"remote https with basic auth", prom(url("https://metrics@prom.example:9090") + pwFile(good)), "", "", true},
		{"loopback http with basic auth", prom(url("http://metrics@127.0.0.1:9090") + pwFile(good)), "", "", true},
	}
	if os.Geteuid() == 0 {
		tests = append(tests, tc{"password file owned by another user", pg(url("postgres://app@db.example/q") + pwFile(foreign)), "password_file",
			"is owned by uid 65534, not root: chown root: " + foreign, false})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			c, err := config.Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			problems, warnings := CheckCredentials(c)
			got, other := problems, warnings
			if tc.warning {
				got, other = warnings, problems
			}
			if len(other) > 0 {
				t.Errorf("unexpected: %q", other)
			}
			for _, p := range append(problems, warnings...) {
				if strings.Contains(p.String(), "hunter2") || strings.Contains(p.String(), "hun%zz") {
					t.Errorf("the message shows the secret: %s", p)
				}
			}
			if tc.key == "" {
				if len(got) > 0 {
					t.Fatalf("want nothing, got %q", got)
				}
				return
			}
			if len(got) != 1 || got[0].File != path || got[0].Key != "pools.q.source."+tc.key || !strings.Contains(got[0].Msg, tc.msg) {
				t.Fatalf("got %q; want one for pools.q.source.%s in %s containing %q", got, tc.key, path, tc.msg)
			}
			// The daemon's load and reload refuse the same.
			machineProblems, _ := CheckMachine(c)
			found := false
			for _, p := range machineProblems {
				found = found || p == got[0]
			}
			if found == tc.warning {
				t.Errorf("CheckMachine problems %q: want the credential check's verdict among them: %v", machineProblems, !tc.warning)
			}
		})
	}
}

// The fleet's store is judged as a source's: its files, and the scheme of
// a URL that a file holds.
func TestCheckCredentialsFleet(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pw := write("fleet.pw", "hunter2\n")
	pgURL := write("pg.url", "postgres://fleet@127.0.0.1/q?sslmode=disable\n")
	httpURL := write("http.url", "http://127.0.0.1:9090\n")
	// host_id written out: the test does not read this machine's id.
	fleet := func(lines string) string { return "[fleet]\nhost_id = \"h1\"\n" + lines }
	redis := fleet("url = \"redis://127.0.0.1:6379/0\"\n")
	joined := func(extra string) string { return pool("") + "[pools.email.fleet]\n" + extra }
	for _, tc := range []struct {
		name, text, want string // want: "KEY: part of the message", or "" for none
	}{
		{"good", redis + "password_file = \"" + pw + "\"\n" + joined(""), ""},
		{"missing password file", redis + "password_file = \"" + dir + "/nope\"\n" + joined(""), "fleet.password_file: "},
		{"good url file", fleet("url_file = \""+pgURL+"\"\n") + joined(""), ""},
		{"url file of another scheme", fleet("url_file = \""+httpURL+"\"\n") + joined(""), `fleet.url_file: the URL ` + httpURL + ` holds: scheme "http"`},
		{"the pool's own", redis + joined("url_file = \""+dir+"/nope.url\"\n"), "pools.email.fleet.url_file: "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeConfig(t, tc.text)
			c, err := config.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			problems, _ := CheckCredentials(c)
			if tc.want == "" {
				if len(problems) > 0 {
					t.Errorf("problems %v", problems)
				}
				return
			}
			if len(problems) != 1 || !strings.HasPrefix(problems[0].String(), path+": "+tc.want) {
				t.Errorf("problems %v, want one starting %q", problems, path+": "+tc.want)
			}
		})
	}
}

// [prometheus]'s credentials are checked as a source's, and reported under
// config.toml's prometheus keys.
func TestPrometheusCredentials(t *testing.T) {
	c, err := load(t, "[prometheus]\nurl = \"http://127.0.0.1:9090\"\npassword_file = \"/nonexistent/prom.pw\"\n"+pool(""))
	if err != nil {
		t.Fatal(err)
	}
	problems, _ := CheckCredentials(c)
	found := false
	for _, p := range problems {
		found = found || (p.Key == "prometheus.password_file" && p.File == c.Path)
	}
	if !found {
		t.Errorf("problems %v, want prometheus.password_file in %s", problems, c.Path)
	}
}
