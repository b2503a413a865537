package e2e

import (
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"
	"time"
)

// workerIDs is the real and effective uid and gid of the worker's main
// process, as the kernel has them: "uid gid".
func (e *env) workerIDs(unit string) string {
	e.T.Helper()
	pid := e.UnitProp(unit, "MainPID")
	status := e.Sh("cat /proc/" + pid + "/status")
	var uid, gid string
	for _, line := range strings.Split(status, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 3 && f[0] == "Uid:":
			uid = f[1] + "/" + f[2]
		case len(f) >= 3 && f[0] == "Gid:":
			gid = f[1] + "/" + f[2]
		}
	}
	return uid + " " + gid
}

// nobody's primary group is nogroup, not a group named nobody: with no group
// written, the daemon accepts the pool and systemd runs the workers as
// nobody:nogroup.
func TestUsersNobodyPrimaryGroup(t *testing.T) {
	parallel(t)
	e := setup(t)
	if out := e.Sh("getent passwd nobody | cut -d: -f4; getent group nogroup | cut -d: -f3; getent group nobody || echo none"); strings.Fields(out)[0] != "65534" ||
		strings.Fields(out)[1] != "65534" || strings.Fields(out)[2] != "none" {
		t.Fatalf("this test needs nobody with primary group nogroup (65534) and no group nobody; the sandbox has:\n%s", out)
	}
	// The worker needs no database: it only has to run as someone.
	e.Configure(e.poolConfig("nobody", "exec = [\"/bin/sleep\", \"infinity\"]\nuser = \"nobody\"\nmin_workers = 1\n"))
	e.Sh("flexiq-scaled check-config >/dev/null")
	e.StartDaemon()
	e.waitWorkers("nobody", 1, 15*time.Second)
	unit := "flexiq-nobody@1.service"
	if got := e.workerIDs(unit); got != "65534/65534 65534/65534" {
		t.Errorf("worker runs as uid/euid gid/egid %s, want nobody:nogroup (65534)", got)
	}
	if u, g := e.UnitProp(unit, "User"), e.UnitProp(unit, "Group"); u != "nobody" || g != "" {
		t.Errorf("worker unit User=%q Group=%q; want nobody and no Group= (systemd's primary group)", u, g)
	}
}

// A user that exists only in systemd-userdb (a JSON record in /etc/userdb,
// served by nss-systemd: the sandbox's nsswitch.conf says "passwd: files
// systemd") is no user to os/user, which reads /etc/passwd only. The daemon
// resolves it through NSS, as systemd does, and its workers run as it.
func TestUsersFromUserdb(t *testing.T) {
	parallel(t)
	e := setup(t)
	const name, id = "flexiq-udb", "4711"
	if _, err := os.Stat("/etc/userdb/" + name + ".user"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the host already has /etc/userdb/%s.user (%v); this test would not tell the sandbox's from it", name, err)
	}
	if out := e.Sh("grep -E '^passwd:|^group:' /etc/nsswitch.conf"); !strings.Contains(out, "systemd") {
		t.Skipf("nss-systemd is not configured in the sandbox:\n%s", out)
	}
	// nss-systemd looks records up by name and by number: both files.
	e.Sh(`mkdir -p /etc/userdb
cat >/etc/userdb/` + name + `.user <<'EOF'
{"userName":"` + name + `","uid":` + id + `,"gid":` + id + `,"disposition":"regular","homeDirectory":"/","shell":"/usr/sbin/nologin"}
EOF
cat >/etc/userdb/` + name + `.group <<'EOF'
{"groupName":"` + name + `","gid":` + id + `,"disposition":"regular"}
EOF
ln -sf ` + name + `.user /etc/userdb/` + id + `.user
ln -sf ` + name + `.group /etc/userdb/` + id + `.group`)
	t.Cleanup(func() {
		e.SB.Exec(e.Ctx(), "sh", "-c", "rm -f /etc/userdb/"+name+".* /etc/userdb/"+id+".*")
	})
	// The sandbox's root is an overlay: the record must not reach the host.
	if _, err := os.Stat("/etc/userdb/" + name + ".user"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the userdb record written in the sandbox is visible on the host (%v)", err)
	}
	if out := e.Sh("getent passwd " + name + "; getent group " + name + "; grep -c '^" + name + ":' /etc/passwd /etc/group || true"); !strings.Contains(out, name+":x:"+id+":"+id+":") ||
		!strings.Contains(out, "/etc/passwd:0") || !strings.Contains(out, "/etc/group:0") {
		t.Fatalf("the user should exist through NSS only:\n%s", out)
	}

	e.Configure(e.poolConfig("udb", "exec = [\"/bin/sleep\", \"infinity\"]\nuser = \""+name+"\"\ngroup = \""+name+"\"\nmin_workers = 2\n"))
	if out, err := e.SB.Exec(e.Ctx(), "flexiq-scaled", "check-config"); err != nil {
		t.Fatalf("check-config refuses a userdb user: %v\n%s", err, out)
	}
	e.StartDaemon()
	e.waitWorkers("udb", 2, 15*time.Second)
	for _, unit := range e.Workers("udb", "active") {
		if got := e.workerIDs(unit); got != id+"/"+id+" "+id+"/"+id {
			t.Errorf("%s runs as uid/euid gid/egid %s, want %s", unit, got, id)
		}
	}

	// And a name that no source knows is still refused, by the daemon
	// too: NSS is asked, not skipped.
	e.Configure(e.poolConfig("udb", "exec = [\"/bin/sleep\", \"infinity\"]\nuser = \"flexiq-nobody-knows\"\n"))
	e.Sh("if systemctl reload flexiq-scaled.service; then echo 'reload accepted' >&2; exit 1; fi")
	e.Eventually(10*time.Second, "the reload refused for an unknown user", func() (bool, string) {
		out := e.JournalText("-u", daemonUnit)
		return strings.Contains(out, `pools.udb.user: user "flexiq-nobody-knows" does not exist`), out
	})
}

// The app shortcut's bare "flexiq", installed in a virtualenv that only the
// pool's PATH names: systemd looks it up in its fixed search path and fails
// every start with 203/EXEC, which check-config predicts, naming the fix;
// the exec it suggests then runs.
func TestExecResolvedAsSystemd(t *testing.T) {
	parallel(t)
	e := setup(t)
	const venv = "/opt/flexiq-e2e-venv/bin"
	if out := e.Sh("command -v flexiq || echo none"); strings.TrimSpace(out) != "none" {
		t.Skipf("the sandbox has a flexiq of its own: %s", out)
	}
	e.Sh("mkdir -p " + venv + " && printf '#!/bin/sh\\nexec sleep infinity\\n' >" + venv + "/flexiq && chmod 0755 " + venv + "/flexiq")
	t.Cleanup(func() { e.SB.Exec(e.Ctx(), "rm", "-rf", "/opt/flexiq-e2e-venv") })
	pool := func(command string) string {
		return "[pools.venv]\n" + command + "\nenvironment = { PATH = \"" + venv + ":/usr/bin:/bin\" }\nmin_workers = 1\npoll_interval_sec = 1\n" +
			"[pools.venv.source]\npath = \"" + e.DBPath + "\"\n"
	}

	e.Configure(pool(`app = "myapp.tasks:queue"`))
	out, err := e.SB.Exec(e.Ctx(), "flexiq-scaled", "check-config")
	wantFix := `found at ` + venv + `/flexiq via the pool's environment PATH, which systemd does not use: write exec = ["` + venv + `/flexiq", "worker", "--app", "myapp.tasks:queue"] instead of app`
	if err == nil || !strings.Contains(out, "pools.venv.app: \"flexiq\" is not an absolute path") || !strings.Contains(out, wantFix) {
		t.Fatalf("check-config: %v\n%s\nwant an error with %q", err, out, wantFix)
	}
	// What systemd does with that config: every start fails, 203/EXEC.
	e.StartDaemon()
	e.Eventually(20*time.Second, "a start failed with 203/EXEC", func() (bool, string) {
		out := e.JournalText("-u", "flexiq-venv@*.service")
		return strings.Contains(out, "status=203/EXEC"), out
	})

	e.Configure(pool(`exec = ["` + venv + `/flexiq", "worker", "--app", "myapp.tasks:queue"]`))
	if out, err := e.SB.Exec(e.Ctx(), "flexiq-scaled", "check-config"); err != nil {
		t.Fatalf("check-config of the suggested exec: %v\n%s", err, out)
	}
	e.Sh("systemctl reload " + daemonUnit)
	e.waitWorkers("venv", 1, 90*time.Second) // past the crash backoff
}
