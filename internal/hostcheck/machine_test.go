package hostcheck

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/flexiq/flexiq-scaled/internal/config"
)

// fakeNSS answers lookups from a table and records them.
type fakeNSS struct {
	known map[string]bool // "passwd:nobody"
	// ids are the uid and primary gid (passwd) or the gid (group) of
	// known names; a known name not here resolves to 1000.
	ids   map[string][2]uint32
	fail  map[string]bool // lookups that cannot be answered
	asked []string
}

func (f *fakeNSS) lookup(db, name string) (account, error) {
	k := db + ":" + name
	f.asked = append(f.asked, k)
	if f.fail[k] {
		return account{}, os.ErrDeadlineExceeded
	}
	if !f.known[k] {
		return account{}, nil
	}
	ids, ok := f.ids[k]
	if !ok {
		ids = [2]uint32{1000, 1000}
	}
	return account{found: true, id: ids[0], gid: ids[1], known: true}, nil
}

func TestCheckUsersNSS(t *testing.T) {
	for _, tc := range []struct {
		name         string
		extra        string
		nss          fakeNSS
		wantAsked    []string
		wantProblems []string // keys
		wantWarnings []string // keys
	}{
		{
			// The nobody case: its primary group is nogroup, and with no
			// group written there is no group to look up at all.
			name:      "group unset is the primary group",
			extra:     `user = "nobody"`,
			nss:       fakeNSS{known: map[string]bool{"passwd:nobody": true}},
			wantAsked: []string{"passwd:nobody"},
		},
		{
			name:      "user only in NSS (userdb, LDAP), with a group",
			extra:     "user = \"ldapuser\"\ngroup = \"ldapgroup\"",
			nss:       fakeNSS{known: map[string]bool{"passwd:ldapuser": true, "group:ldapgroup": true}},
			wantAsked: []string{"passwd:ldapuser", "group:ldapgroup"},
		},
		{
			name:      "numeric IDs are looked up as such",
			extra:     "user = \"4711\"\ngroup = \"4712\"",
			nss:       fakeNSS{known: map[string]bool{"passwd:4711": true, "group:4712": true}},
			wantAsked: []string{"passwd:4711", "group:4712"},
		},
		{
			name:         "missing user and group",
			extra:        "user = \"ghost\"\ngroup = \"ghosts\"",
			nss:          fakeNSS{},
			wantAsked:    []string{"passwd:ghost", "group:ghosts"},
			wantProblems: []string{"pools.email.user", "pools.email.group"},
		},
		{
			// An NSS source that is down must not refuse the file.
			name:         "cannot check is a warning",
			extra:        `user = "sssduser"`,
			nss:          fakeNSS{fail: map[string]bool{"passwd:sssduser": true}},
			wantAsked:    []string{"passwd:sssduser"},
			wantWarnings: []string{"pools.email.user"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, pool(tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			problems, warnings := checkUsers(c, tc.nss.lookup)
			if !slices.Equal(tc.nss.asked, tc.wantAsked) {
				t.Errorf("looked up %v, want %v", tc.nss.asked, tc.wantAsked)
			}
			if got := keys(problems); !slices.Equal(got, tc.wantProblems) {
				t.Errorf("problems %v, want keys %v", problems, tc.wantProblems)
			}
			if got := keys(warnings); !slices.Equal(got, tc.wantWarnings) {
				t.Errorf("warnings %v, want keys %v", warnings, tc.wantWarnings)
			}
		})
	}
}

// Each name is looked up once, however many pools use it: a lookup runs
// getent.
func TestCheckUsersAsksOnce(t *testing.T) {
	c, err := load(t, `
[pools.a]
exec = ["/bin/true"]
user = "app"
[pools.a.source]
path = "/var/lib/flexiq/a.db"
[pools.b]
exec = ["/bin/true"]
user = "app"
group = "app"
[pools.b.source]
path = "/var/lib/flexiq/b.db"
[pools.c]
exec = ["/bin/true"]
user = "ghost"
[pools.c.source]
path = "/var/lib/flexiq/c.db"
`)
	if err != nil {
		t.Fatal(err)
	}
	nss := fakeNSS{known: map[string]bool{"passwd:app": true, "group:app": true}}
	problems, _ := checkUsers(c, nss.lookup)
	if want := []string{"passwd:app", "group:app", "passwd:ghost"}; !slices.Equal(nss.asked, want) {
		t.Errorf("looked up %v, want %v", nss.asked, want)
	}
	if got := keys(problems); !slices.Equal(got, []string{"pools.c.user"}) {
		t.Errorf("problems %v", problems)
	}
}

// The real lookups, against this machine's NSS: root exists everywhere.
func TestNSSLookup(t *testing.T) {
	for name, lookup := range map[string]lookupFunc{"getent": nssLookup, "os/user": osUserLookup} {
		if name == "getent" {
			if _, err := exec.LookPath("getent"); err != nil {
				t.Logf("no getent here: %v", err)
				continue
			}
		}
		for _, tc := range []struct {
			db, name string
			want     bool
		}{
			{dbPasswd, "root", true},
			{dbPasswd, "0", true},
			{dbGroup, "root", true},
			{dbGroup, "0", true},
			{dbPasswd, "no_such_user_flexiq_test", false},
			{dbGroup, "no_such_group_flexiq_test", false},
			{dbPasswd, "-no-such-option", false}, // a name, not an option
			{dbPasswd, "3999999999", false},
		} {
			a, err := lookup(tc.db, tc.name)
			if err != nil || a.found != tc.want {
				t.Errorf("%s: %s %q = %v, %v; want %v", name, tc.db, tc.name, a.found, err, tc.want)
			}
			// root and 0 resolve to uid 0 and gid 0 in both.
			if a.found && (!a.known || a.id != 0 || a.gid != 0) {
				t.Errorf("%s: %s %q = %+v; want id 0, gid 0", name, tc.db, tc.name, a)
			}
		}
	}
}

func TestResolvePath(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "real/sub"), 0o755))
	must(os.Symlink("real", filepath.Join(dir, "rel")))                        // relative
	must(os.Symlink(filepath.Join(dir, "rel/sub"), filepath.Join(dir, "abs"))) // absolute, through another link
	must(os.Symlink("/var/tmp/flexiq-none/q.db", filepath.Join(dir, "dangling")))
	must(os.Symlink("../real/../real/sub", filepath.Join(dir, "real/up")))
	must(os.Symlink("loop", filepath.Join(dir, "loop")))
	for in, want := range map[string]string{
		dir + "/real/sub/q.db":   dir + "/real/sub/q.db",
		dir + "/rel/sub/q.db":    dir + "/real/sub/q.db",
		dir + "/abs/q.db":        dir + "/real/sub/q.db",
		dir + "/abs/missing/q":   dir + "/real/sub/missing/q",
		dir + "/dangling":        "/var/tmp/flexiq-none/q.db",
		dir + "/real/up/q.db":    dir + "/real/sub/q.db",
		dir + "/loop/q.db":       dir + "/loop/q.db", // gives up, as the kernel would (ELOOP)
		dir + "/nothing/here.db": dir + "/nothing/here.db",
	} {
		// The temp dir itself may sit behind a link (/tmp on some hosts).
		base, err := filepath.EvalSymlinks(dir)
		must(err)
		want = strings.Replace(want, dir, base, 1)
		if got := resolvePath(in); got != want {
			t.Errorf("resolvePath(%s) = %s, want %s", in, got, want)
		}
	}

	// CheckPaths: a path that looks harmless but leads into /var/tmp.
	c, err := load(t, withSource(`path = "/var/lib/flexiq/q.db"`))
	must(err)
	c.Pools["email"].Source = withPath(t, c.Pools["email"].Source, dir+"/dangling")
	ps := CheckPaths(c)
	if len(ps) != 1 || !strings.Contains(ps[0].Msg, "leads to /var/tmp/flexiq-none/q.db") || !strings.Contains(ps[0].Msg, "PrivateTmp=yes") {
		t.Errorf("CheckPaths through a link into /var/tmp: %v", ps)
	}
	c.Pools["email"].Source = withPath(t, c.Pools["email"].Source, "/var/lib/flexiq/q.db")
	if ps := CheckPaths(c); len(ps) != 0 {
		t.Errorf("CheckPaths of a plain path: %v", ps)
	}
}

func TestCheckExecutables(t *testing.T) {
	dir := t.TempDir()
	bin, venv := filepath.Join(dir, "bin"), filepath.Join(dir, "venv/bin")
	for _, d := range []string{bin, venv, filepath.Join(bin, "adir")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for path, mode := range map[string]os.FileMode{
		bin + "/worker":    0o755,
		bin + "/noexec":    0o644,
		venv + "/flexiq":   0o755,
		venv + "/onlyhere": 0o755,
	} {
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	search := []string{filepath.Join(dir, "nothing"), bin}
	notHidden := func(string) bool { return false }
	for _, tc := range []struct {
		name, pool string
		hidden     func(string) bool
		key, msg   string // "" = no problem
	}{
		{"absolute", `exec = ["` + bin + `/worker"]`, notHidden, "", ""},
		{"name in the search path", `exec = ["worker", "-v"]`, notHidden, "", ""},
		{"absolute, missing", `exec = ["` + bin + `/nope"]`, notHidden, "exec", bin + "/nope: no such file or directory; systemd would fail every worker start with status=203/EXEC"},
		{"absolute, not executable", `exec = ["` + bin + `/noexec"]`, notHidden, "exec", "not executable (mode 0644)"},
		{"absolute, directory", `exec = ["` + bin + `/adir"]`, notHidden, "exec", "is a directory"},
		{"name, not executable", `exec = ["noexec"]`, notHidden, "exec", "in systemd's fixed search path it is not executable (" + bin + "/noexec: not executable"},
		{"name, missing", `exec = ["nope", "a"]`, notHidden, "exec", `write the command's absolute path, as in exec = ["/ABSOLUTE/PATH/nope", ...]`},
		{"app, in the pool's PATH only", "app = \"myapp:q\"\nenvironment = { PATH = \"/nonexistent:" + venv + "\" }", notHidden, "app",
			`found at ` + venv + `/flexiq via the pool's environment PATH, which systemd does not use: write exec = ["` + venv + `/flexiq", "worker", "--app", "myapp:q"] instead of app`},
		{"exec, in the pool's PATH only", "exec = [\"onlyhere\", \"--x\"]\nenvironment = { PATH = \"" + venv + "\" }", notHidden, "exec",
			`found at ` + venv + `/onlyhere via the pool's environment PATH, which systemd does not use: write exec = ["` + venv + `/onlyhere", ...]`},
		// The daemon cannot see /home; the workers can.
		{"hidden from the daemon", `exec = ["/home/app/venv/bin/flexiq"]`, func(d string) bool { return d == "/home" }, "", ""},
		{"under /home, seen", `exec = ["/home/no-such-user-flexiq/flexiq"]`, notHidden, "exec", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, `[pools.email]
`+tc.pool+`
[pools.email.source]
path = "/var/lib/flexiq/flexiq.db"
`)
			if err != nil {
				t.Fatal(err)
			}
			ps := checkExecutables(c, search, tc.hidden)
			switch {
			case tc.key == "" && len(ps) != 0:
				t.Errorf("unexpected problems: %v", ps)
			case tc.key != "" && (len(ps) != 1 || ps[0].Key != "pools.email."+tc.key || !strings.Contains(ps[0].Msg, tc.msg)):
				t.Errorf("problems %v; want one at %s containing %q", ps, tc.key, tc.msg)
			}
		})
	}
}

// The search path is systemd's own, when systemd can say what it is.
func TestSystemdSearchPath(t *testing.T) {
	out, err := exec.Command("systemd-path", "search-binaries-default").Output()
	if err != nil {
		t.Skipf("systemd-path: %v", err)
	}
	if got, want := strings.Join(systemdSearchPath, ":"), strings.TrimSpace(string(out)); got != want {
		t.Errorf("systemdSearchPath = %s, systemd says %s", got, want)
	}
}

func TestSecretWarnings(t *testing.T) {
	text := pool(`environment = { DB_PASSWORD = "x", API_TOKEN = "y", Stripe_Api_Key = "z", DATABASE_URL = "postgres://app:hunter2@db/app", ` +
		`PLAIN_URL = "https://example.org/a:b@c", USER_URL = "redis://app@cache", LANG = "C.UTF-8", PYTHONUNBUFFERED = "1" }`)
	path := writeConfig(t, text)
	c, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if ws := SecretWarnings(c); len(ws) != 0 {
		t.Errorf("a 0600 file: %v", ws)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	ws := SecretWarnings(c)
	want := []string{"pools.email.environment.API_TOKEN", "pools.email.environment.DATABASE_URL",
		"pools.email.environment.DB_PASSWORD", "pools.email.environment.Stripe_Api_Key"}
	if !slices.Equal(keys(ws), want) {
		t.Errorf("warnings at %v, want %v", keys(ws), want)
	}
	for _, w := range ws {
		if !strings.Contains(w.Msg, "world-readable (mode 0644)") || !strings.Contains(w.Msg, "environment_file") ||
			!strings.Contains(w.Msg, "chmod 0640 "+path) {
			t.Errorf("warning lacks the fix: %s", w)
		}
	}
	// Warnings carries them, so the daemon logs them too.
	if all := strings.Join(Warnings(c), "\n"); !strings.Contains(all, "pools.email.environment.DB_PASSWORD: its name looks like a secret's") {
		t.Errorf("Warnings lacks the secret warning:\n%s", all)
	}
}

// A problem is one printable line, whatever the file held.
func TestProblemIsOneLine(t *testing.T) {
	p := config.Problem{File: "f.toml", Key: "pools.a", Msg: "x\ny\x00z\xffé\t"}
	if got, want := p.String(), `f.toml: pools.a: x\ny\x00z\xffé\t`; got != want {
		t.Errorf("String() = %s, want %s", got, want)
	}
}

// CheckMachine refuses what the daemon must refuse and only warns about the
// command, which may be deployed after the file.
func TestCheckMachine(t *testing.T) {
	c, err := load(t, `
[pools.a]
exec = ["/nonexistent/flexiq-test-worker"]
user = "root"
[pools.a.source]
path = "/var/lib/flexiq/a.db"
[pools.b]
exec = ["/bin/true"]
user = "no_such_user_flexiq_test"
[pools.b.source]
path = "/var/lib/flexiq/b.db"
`)
	if err != nil {
		t.Fatal(err)
	}
	problems, warnings := CheckMachine(c)
	if got := keys(problems); !slices.Equal(got, []string{"pools.b.user"}) {
		t.Errorf("problems %v", problems)
	}
	if got := keys(warnings); !slices.Equal(got, []string{"pools.a.exec"}) {
		t.Errorf("warnings %v", warnings)
	}
}

// Root's identity, uid 0 or gid 0, in every spelling: written out it is
// warned about (by Warnings when the spelling says so, by checkUsers when
// NSS does), and a default user that resolves to it is refused.
func TestRootInEverySpelling(t *testing.T) {
	root := [2]uint32{0, 0}
	for _, tc := range []struct {
		name     string
		extra    string
		nss      fakeNSS
		warnings []string // "KEY: text" substrings, from Warnings and checkUsers
		problems []string
	}{
		{name: "user root", extra: `user = "root"`,
			nss:      fakeNSS{known: map[string]bool{"passwd:root": true}, ids: map[string][2]uint32{"passwd:root": root}},
			warnings: []string{"pools.email.user: workers run as root (uid 0)"}},
		{name: "user 0", extra: `user = "0"`,
			nss:      fakeNSS{known: map[string]bool{"passwd:0": true}, ids: map[string][2]uint32{"passwd:0": root}},
			warnings: []string{"pools.email.user: workers run as root (uid 0)"}},
		{name: "user 00, NSS down", extra: `user = "00"`,
			nss:      fakeNSS{fail: map[string]bool{"passwd:00": true}},
			warnings: []string{"pools.email.user: workers run as root (uid 0)", "pools.email.user: cannot check"}},
		{name: "user toor, uid 0 through NSS", extra: `user = "toor"`,
			nss:      fakeNSS{known: map[string]bool{"passwd:toor": true}, ids: map[string][2]uint32{"passwd:toor": root}},
			warnings: []string{`pools.email.user: user "toor" is uid 0 (root): workers run as root`}},
		{name: "group root", extra: "user = \"app\"\ngroup = \"root\"",
			nss:      fakeNSS{known: map[string]bool{"passwd:app": true, "group:root": true}, ids: map[string][2]uint32{"group:root": root}},
			warnings: []string{"pools.email.group: workers run with group root (gid 0)"}},
		{name: "group 0", extra: "user = \"app\"\ngroup = \"0\"",
			nss:      fakeNSS{known: map[string]bool{"passwd:app": true, "group:0": true}, ids: map[string][2]uint32{"group:0": root}},
			warnings: []string{"pools.email.group: workers run with group root (gid 0)"}},
		{name: "group wheel, gid 0 through NSS", extra: "user = \"app\"\ngroup = \"wheel\"",
			nss:      fakeNSS{known: map[string]bool{"passwd:app": true, "group:wheel": true}, ids: map[string][2]uint32{"group:wheel": root}},
			warnings: []string{`pools.email.group: group "wheel" is gid 0 (root): workers run with group root`}},
		{name: "group unset, primary group 0", extra: `user = "app"`,
			nss:      fakeNSS{known: map[string]bool{"passwd:app": true}, ids: map[string][2]uint32{"passwd:app": {1000, 0}}},
			warnings: []string{`pools.email.user: the primary group of user "app" is gid 0 (root)`}},
		{name: "primary group 0, group written", extra: "user = \"app\"\ngroup = \"app\"",
			nss: fakeNSS{known: map[string]bool{"passwd:app": true, "group:app": true}, ids: map[string][2]uint32{"passwd:app": {1000, 0}}}},
		{name: "default user resolves to uid 0", extra: ``,
			nss:      fakeNSS{known: map[string]bool{"passwd:flexiq": true}, ids: map[string][2]uint32{"passwd:flexiq": root}},
			problems: []string{`pools.email.user: the default user "flexiq" is uid 0 (root)`}},
		{name: "an ordinary user", extra: "user = \"app\"\ngroup = \"app\"",
			nss: fakeNSS{known: map[string]bool{"passwd:app": true, "group:app": true}}},
		{name: "numeric, not 0", extra: "user = \"4711\"\ngroup = \"4712\"",
			nss: fakeNSS{known: map[string]bool{"passwd:4711": true, "group:4712": true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(t, pool(tc.extra))
			if err != nil {
				t.Fatal(err)
			}
			problems, warnings := checkUsers(c, tc.nss.lookup)
			got := Warnings(c)
			for _, w := range warnings {
				got = append(got, w.String())
			}
			check := func(what string, got, want []string) {
				t.Helper()
				var root []string
				for _, g := range got {
					// The temporary directory's name holds the test's.
					_, g, _ = strings.Cut(g, "config.toml: ")
					if strings.Contains(g, "root") || strings.Contains(g, "cannot check") {
						root = append(root, g)
					}
				}
				if len(root) != len(want) {
					t.Errorf("%s %q, want %q", what, root, want)
					return
				}
				for _, w := range want {
					if !slices.ContainsFunc(root, func(g string) bool { return strings.Contains(g, w) }) {
						t.Errorf("%s %q lack %q", what, root, w)
					}
				}
			}
			check("warnings", got, tc.warnings)
			var ps []string
			for _, p := range problems {
				ps = append(ps, p.String())
			}
			check("problems", ps, tc.problems)
		})
	}
}
